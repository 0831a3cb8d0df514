import { randomUUID } from "node:crypto";
import type { CopyReport, CopySource } from "../copy";
import { DatabaseError } from "../errors";
import type { Store, StoreEvents, StoreHandle } from "../ports";
import { PostgresAccessStore } from "./access";
import { PostgresFailureLog } from "./failure-log";
import { connect, type Db, type Sql } from "./connection";
import { connectionProblem } from "./faults";
import { fillEmptyDatabase } from "./fill";
import { InstanceLiveness } from "./liveness";
import { PostgresJobQueue, PostgresJobReads } from "./jobs";
import { embeddedMigrations } from "./migrations";
import { PostgresRecords } from "./records";
import { dropDriverStrays } from "./strays";
import { TransactionConnections } from "./transactions";
import { WakeUps } from "./wake-ups";

/** What a worker thread needs to open the store: the database's URL, and the serving instance it belongs to. */
export type PostgresHandle = StoreHandle & { backend: "postgres"; url: string; instance?: string };

// Connections per pool. Each thread has a pool and one connection for its transactions (a run's, an
// intake's); the server's pool serves reads and key checks, a worker's the claim's marks and payload reads.
// With the listener's one, an instance opens at most serverConnections + 2 + (workerConnections + 1) × workers
// connections (12 with 2 worker threads).
export const serverConnections = 4;
export const workerConnections = 2;

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
  private readonly transactions: TransactionConnections;

  private constructor(
    private readonly url: string,
    private readonly sql: Sql,
    db: Db,
    // The serving instance whose connections these are (see liveness.ts); none for a CLI command's store.
    private readonly instance?: string,
    // The serving instance's heartbeat, kept by its server thread's store (not by its worker threads').
    private readonly liveness?: InstanceLiveness,
  ) {
    this.records = new PostgresRecords(db);
    this.transactions = new TransactionConnections(url, instance);
    this.queue = new PostgresJobQueue(sql, this.records, this.transactions);
    this.jobs = new PostgresJobReads(db);
    this.access = new PostgresAccessStore(db);
    this.failures = new PostgresFailureLog(sql);
  }

  /**
   * Connects and migrates (one instance at a time: the others wait, then find nothing left to do). `server`: a
   * serving instance, which names its connections after itself and writes its first heartbeat before it runs
   * anything.
   */
  static async open(url: string, { server = false } = {}): Promise<PostgresStore> {
    dropDriverStrays();
    const instance = server ? randomUUID() : undefined;
    const { sql, db } = connect(url, { max: serverConnections, instance });
    const liveness = instance ? new InstanceLiveness(sql, instance) : undefined;
    try {
      await migrate(sql, db);
      await liveness?.beat();
    } catch (error) {
      await sql.end({ timeout: 1 });
      throw connectionProblem(error, url);
    }
    liveness?.start();
    return new PostgresStore(url, sql, db, instance, liveness);
  }

  /** A worker thread's own pool; the server has migrated. */
  static openInThread(handle: PostgresHandle): PostgresStore {
    dropDriverStrays();
    const { sql, db } = connect(handle.url, { max: workerConnections, instance: handle.instance });
    return new PostgresStore(handle.url, sql, db, handle.instance);
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
    return fillEmptyDatabase(this.transactions, source, onTable);
  }

  async health(): Promise<{ reachable: boolean; migrated: boolean; wakeUps?: boolean }> {
    const [row] = await this.sql`SELECT count(*)::int AS count FROM drizzle.__drizzle_migrations`;
    return { reachable: true, migrated: row!.count >= embeddedMigrations().length, ...(this.wakeUps ? { wakeUps: this.wakeUps.up } : {}) };
  }

  async close(): Promise<void> {
    await this.liveness?.stop();
    await this.wakeUps?.stop();
    await this.queue.abandonAll();
    await this.transactions.close();
    await this.sql.end({ timeout: 5 });
  }
}

/**
 * Applies the embedded migrations under a session advisory lock. Refuses a database another program's tables
 * are in, and one a newer importd has migrated.
 */
async function migrate(sql: Sql, db: Db): Promise<void> {
  const session = await sql.reserve();
  try {
    await session`SELECT pg_advisory_lock(hashtext(${migrationLock}))`;
    try {
      const known = embeddedMigrations();
      const [{ exists }] = (await session`SELECT to_regclass('drizzle.__drizzle_migrations') IS NOT NULL AS exists`) as unknown as [{ exists: boolean }];
      if (exists) {
        const applied = await session`SELECT hash FROM drizzle.__drizzle_migrations ORDER BY id`;
        if (applied.length > known.length) throw new DatabaseError(`the database was migrated by a newer importd (${applied.length} migrations; this importd knows ${known.length}): run the newer importd`);
        if (applied.some((row, index) => row.hash !== known[index]!.hash)) throw new DatabaseError("the database has migrations this importd does not know");
      } else {
        const tables = await session`SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename LIMIT 6`;
        if (tables.length > 0) {
          const names = tables.map((row) => row.tablename as string);
          throw new DatabaseError(`the database was not created by importd (it holds the tables ${names.slice(0, 5).join(", ")}${names.length > 5 ? ", …" : ""}): give importd a database of its own`);
        }
      }
      const internals = db as unknown as { dialect: { migrate(m: unknown, session: unknown, config: object): Promise<void> }; session: unknown };
      await internals.dialect.migrate(known, internals.session, {});
    } finally {
      await session`SELECT pg_advisory_unlock(hashtext(${migrationLock}))`;
    }
  } finally {
    session.release();
  }
}
