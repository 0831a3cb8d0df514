import { randomUUID } from "node:crypto";
import type pg from "pg";
import type { CopyReport, CopySource } from "../copy";
import { DatabaseError } from "../errors";
import type { Store, StoreEvents, StoreHandle } from "../ports";
import { PostgresAccessStore } from "./access";
import { deadlines, onPool, openPool, statement, type Db } from "./connection";
import { PostgresFailureLog } from "./failure-log";
import { connectionProblem } from "./faults";
import { fillEmptyDatabase } from "./fill";
import { InstanceLiveness } from "./liveness";
import { PostgresJobQueue, PostgresJobReads } from "./jobs";
import { embeddedMigrations } from "./migrations";
import { PostgresRecords } from "./records";
import { WakeUps } from "./wake-ups";

/** What a worker thread needs to open the store: the database's URL, and the serving instance it belongs to. */
export type PostgresHandle = StoreHandle & { backend: "postgres"; url: string; instance?: string };

// Connections per pool, one pool per thread. The server thread's serves the HTTP API's reads, key checks and the
// heartbeat; a worker's, its intakes' transactions, its run's transaction (held from claim to commit) and the claim's
// marks and payload reads beside it. With the listener's own, an instance opens at most serverConnections + 1 +
// workerConnections × workers connections (11 with 2 worker threads).
export const serverConnections = 4;
export const workerConnections = 3;

// The lock that makes one instance at a time migrate, so that several may start at once.
const migrationLock = "importd migrations";

/**
 * The store on PostgreSQL: any number of importd instances, each thread with its own bounded pool. The queue's
 * rules are in the database (see PostgresJobQueue); nothing is cached, so a key created or revoked anywhere
 * counts on the next request everywhere.
 */
export class PostgresStore implements Store {
  readonly queue: PostgresJobQueue;
  readonly jobs: PostgresJobReads;
  readonly records: PostgresRecords;
  readonly access: PostgresAccessStore;
  readonly failures: PostgresFailureLog;
  private wakeUps?: WakeUps;
  private closed?: Promise<void>;

  private constructor(
    private readonly url: string,
    private readonly pool: pg.Pool,
    db: Db,
    // The serving instance whose connections these are (see liveness.ts); none for a CLI command's store.
    private readonly instance?: string,
    // The serving instance's heartbeat, kept by its server thread's store (not by its worker threads').
    private readonly liveness?: InstanceLiveness,
  ) {
    this.records = new PostgresRecords(db);
    this.queue = new PostgresJobQueue(pool, this.records);
    this.jobs = new PostgresJobReads(onPool(pool));
    this.access = new PostgresAccessStore(pool, db);
    this.failures = new PostgresFailureLog(onPool(pool));
  }

  /**
   * Connects and migrates (one instance at a time: the others wait, then find nothing left to do). `server`: a
   * serving instance, which names its connections after itself and writes its first heartbeat before it runs
   * anything.
   */
  static async open(url: string, { server = false } = {}): Promise<PostgresStore> {
    const instance = server ? randomUUID() : undefined;
    const { pool, db } = openPool(url, { max: serverConnections, instance });
    const liveness = instance ? new InstanceLiveness(onPool(pool), instance) : undefined;
    try {
      await migrate(pool, db);
      await liveness?.beat();
    } catch (error) {
      await pool.end();
      throw connectionProblem(error, url);
    }
    liveness?.start();
    return new PostgresStore(url, pool, db, instance, liveness);
  }

  /** A worker thread's own pool; the server has migrated. */
  static openInThread(handle: PostgresHandle): PostgresStore {
    const { pool, db } = openPool(handle.url, { max: workerConnections, instance: handle.instance });
    return new PostgresStore(handle.url, pool, db, handle.instance);
  }

  handleFor(): PostgresHandle {
    return { backend: "postgres", url: this.url, instance: this.instance };
  }

  // A thread that dies closes its connections with it: PostgreSQL rolls its transaction back and frees its locks.
  threadDied(): void {}

  watch(events: StoreEvents): void {
    this.wakeUps ??= new WakeUps(this.url, events, this.instance);
    this.liveness?.judge(events);
  }

  /** Fills this database, which must hold no importd data yet, with `source` (storage copy; see fill.ts). */
  fill(source: CopySource, onTable: (name: string, rows: number) => void): Promise<CopyReport> {
    return fillEmptyDatabase(this.pool, source, onTable);
  }

  async health(): Promise<{ reachable: boolean; migrated: boolean; wakeUps?: boolean }> {
    const [row] = await onPool(this.pool).query<{ count: number }>(migrationsApplied());
    return { reachable: true, migrated: row!.count >= embeddedMigrations().length, ...(this.wakeUps ? { wakeUps: this.wakeUps.up } : {}) };
  }

  /** Stops and lets go of every connection; once, however often it is asked. */
  close(): Promise<void> {
    return (this.closed ??= (async () => {
      await this.liveness?.stop();
      await this.wakeUps?.stop();
      await this.queue.abandonAll();
      await this.pool.end();
    })());
  }
}

const migrationsApplied = statement(`SELECT count(*)::int AS count FROM drizzle.__drizzle_migrations`);

/**
 * Applies the embedded migrations under a session advisory lock, on a connection of their own (waiting for another
 * instance's migrations as long as they take). Refuses a database another program's tables are in, and one a newer
 * importd has migrated.
 */
async function migrate(pool: pg.Pool, db: Db): Promise<void> {
  const session = await pool.connect();
  const waiting = { query_timeout: deadlines.bulkStatementMs };
  let failed: Error | undefined;
  try {
    await session.query({ text: "SELECT pg_advisory_lock(hashtext($1))", values: [migrationLock], ...waiting });
    try {
      const known = embeddedMigrations();
      const { rows: [migrated] } = await session.query<{ exists: boolean }>("SELECT to_regclass('drizzle.__drizzle_migrations') IS NOT NULL AS exists");
      if (migrated!.exists) {
        const { rows: applied } = await session.query<{ hash: string }>("SELECT hash FROM drizzle.__drizzle_migrations ORDER BY id");
        if (applied.length > known.length) throw new DatabaseError(`the database was migrated by a newer importd (${applied.length} migrations; this importd knows ${known.length}): run the newer importd`);
        if (applied.some((row, index) => row.hash !== known[index]!.hash)) throw new DatabaseError("the database has migrations this importd does not know");
      } else {
        const { rows: tables } = await session.query<{ tablename: string }>("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename LIMIT 6");
        if (tables.length > 0) {
          const names = tables.map((row) => row.tablename);
          throw new DatabaseError(`the database was not created by importd (it holds the tables ${names.slice(0, 5).join(", ")}${names.length > 5 ? ", …" : ""}): give importd a database of its own`);
        }
      }
      // Drizzle's own migrator, given the embedded migrations instead of a folder (see ../embedded-migrations.ts).
      const internals = db as unknown as { dialect: { migrate(m: unknown, session: unknown, config: object): Promise<void> }; session: unknown };
      await internals.dialect.migrate(known, internals.session, {});
    } finally {
      await session.query({ text: "SELECT pg_advisory_unlock(hashtext($1))", values: [migrationLock] });
    }
  } catch (error) {
    failed = error as Error;
    throw error;
  } finally {
    session.release(failed);
  }
}
