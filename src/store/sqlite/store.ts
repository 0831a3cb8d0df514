import type { CopySource } from "../copy";
import type { CommitWatch, OutboxRows, Store, StoreHandle } from "../ports";
import { SqliteAccessStore } from "./access";
import { changeCounterOf, closeDatabase, migrate, migrationsApplied, openDatabase, type Db } from "./database";
import { withSnapshot } from "./dump";
import { SqliteJobQueue, SqliteJobReads } from "./jobs";
import { RecordTables } from "./records";
import { SqliteSyncs } from "./syncs";
import { lockDataDirectory, type ServerLock } from "./server-lock";
import { SqliteWebhooks } from "./webhooks";
import { WriteLock } from "./write-lock";

/** Storage copy reads a stopped appliance's store and ends no job in it: no webhook delivery to make (it would throw). */
const endsNoJob: OutboxRows = () => {
  throw new Error("a stopped appliance's store, opened to be copied, ends no job");
};

/** What a worker thread needs to open the data directory's database: the write lock's memory comes along. */
export type SqliteHandle = StoreHandle & { backend: "sqlite"; dataDir: string; writeLock: SharedArrayBuffer; owner: number };

/**
 * The store on SQLite: one WAL file under the data directory, owned by one process. Each thread has its own
 * connection; the threads that write take turns on one WriteLock (see write-lock.ts), whose memory the
 * server's store creates and hands to each worker thread with its handle.
 */
export class SqliteStore implements Store {
  readonly queue: SqliteJobQueue;
  readonly jobs: SqliteJobReads;
  readonly records: RecordTables;
  readonly syncs: SqliteSyncs;
  readonly access: SqliteAccessStore;
  readonly webhooks: SqliteWebhooks;
  readonly commits?: CommitWatch;
  readonly writesOneAtATime = true;
  private readonly writeLock = WriteLock.sharedBuffer();
  readonly takeUpkeep = () => this.queue.takeCheckpoint();

  private constructor(
    readonly db: Db,
    outboxRows: OutboxRows,
    private readonly dataDir: string,
    // Only the server's connection, the last to close, folds the WAL back at close.
    private readonly checkpointAtClose: boolean,
    // The server's hold on the data directory (see server-lock.ts); the CLI and worker threads have none.
    private readonly serverLock?: ServerLock,
  ) {
    this.queue = new SqliteJobQueue(db, outboxRows);
    this.jobs = new SqliteJobReads(db);
    this.records = new RecordTables(db);
    this.syncs = new SqliteSyncs(db);
    this.access = new SqliteAccessStore(db);
    this.webhooks = new SqliteWebhooks(db);
    // For the server's caches (read-cache.ts): its own writes have not begun yet.
    if (serverLock) {
      changeCounterOf(db).settle();
      this.commits = changeCounterOf(db).watch;
    }
  }

  /**
   * Opens (creating it if need be) and migrates the data directory's database. `server`: first takes the data
   * directory for this process, before anything is read or written (StoreInUse if another server has it). `outbox`:
   * the webhook deliveries a job's end writes (see OutboxRows).
   */
  static open(dataDir: string, { server = false, outbox }: { server?: boolean; outbox: OutboxRows }): SqliteStore {
    return SqliteStore.openLocked(dataDir, outbox, server ? lockDataDirectory(dataDir) : undefined);
  }

  /**
   * The data directory of a stopped appliance, held like a server holds it, so that none starts while it is
   * read (for storage copy; StoreInUse if a server runs on it).
   */
  static openStopped(dataDir: string): SqliteStore {
    return SqliteStore.openLocked(dataDir, endsNoJob, lockDataDirectory(dataDir, "stop it first: storage copy reads a stopped appliance's data, and its pending jobs are finished on PostgreSQL"));
  }

  private static openLocked(dataDir: string, outbox: OutboxRows, lock: ServerLock | undefined): SqliteStore {
    let db: Db | undefined;
    try {
      db = openDatabase(dataDir);
      migrate(db);
    } catch (error) {
      if (db) closeDatabase(db);
      lock?.release();
      throw error;
    }
    return new SqliteStore(db, outbox, dataDir, true, lock);
  }

  /** A worker thread's own connection, taking turns with the process's other writing threads. */
  static openInThread(handle: SqliteHandle, { outbox }: { outbox: OutboxRows }): SqliteStore {
    return new SqliteStore(openDatabase(handle.dataDir, { writeLock: new WriteLock(handle.writeLock, handle.owner) }), outbox, handle.dataDir, false);
  }

  handleFor(threadNumber: number): SqliteHandle {
    return { backend: "sqlite", dataDir: this.dataDir, writeLock: this.writeLock, owner: threadNumber };
  }

  threadDied(threadNumber: number): void {
    // It may have died mid-transaction: SQLite rolls that back, and the other threads must not wait for its turn.
    WriteLock.releaseFor(this.writeLock, threadNumber);
  }

  /** Runs `copy` on one snapshot of the whole database (see dump.ts). */
  snapshot<T>(copy: (source: CopySource) => Promise<T>): Promise<T> {
    return withSnapshot(this.db.$client, copy);
  }

  // One process owns the database: nobody else queues work in it.
  watch(): void {}

  async health(): Promise<{ reachable: boolean; migrated: boolean }> {
    this.db.$client.query("SELECT 1").get();
    return { reachable: true, migrated: migrationsApplied(this.db) };
  }

  /**
   * Closes the connection. The server's, the last to close, first folds the WAL back into the database file,
   * so that the file alone is a complete copy; unless `interrupted`: a thread ended mid-transaction may still
   * hold the write lock, and then the WAL is left for the next start.
   */
  async close(options: { interrupted?: boolean } = {}): Promise<void> {
    closeDatabase(this.db, { checkpoint: this.checkpointAtClose && !options.interrupted });
    this.serverLock?.release();
  }
}
