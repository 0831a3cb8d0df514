import { randomUUID } from "node:crypto";
import type pg from "pg";
import type { CopyReport, CopySource, OnTable } from "../copy";
import type { OutboxRows, Store, StoreEvents, StoreHandle } from "../ports";
import { PostgresAccessStore } from "./access";
import { drizzle } from "drizzle-orm/node-postgres";
import { deadlines, onPool, openClient, openPool, statement, type Db } from "./connection";
import { PostgresFailureLog } from "./failure-log";
import { connectionProblem } from "./faults";
import { fillEmptyDatabase } from "./fill";
import { InstanceLiveness } from "./liveness";
import { PostgresJobQueue, PostgresJobReads } from "./jobs";
import { appliedMigrations, embeddedMigrations } from "./migrations";
import { PostgresRecords } from "./records";
import { PostgresSyncs } from "./syncs";
import { WakeUps } from "./wake-ups";
import { PostgresWebhooks } from "./webhooks";

/** What a worker thread needs to open the store: the database's URL, and the serving instance it belongs to. */
export type PostgresHandle = StoreHandle & { backend: "postgres"; url: string; instance?: string };

// Connections per pool, one pool per thread: the server thread's for the HTTP API's reads and the heartbeat; a worker's
// for its intakes, its run's transaction and the claim's marks and payload reads beside it. With the listener, an
// instance opens at most serverConnections + 1 + workerConnections × workers (11 with 2 worker threads).
export const serverConnections = 4;
export const workerConnections = 3;

// The lock that makes one instance at a time migrate, so that several may start at once.
const migrationLock = "importd migrations";

/**
 * The store on PostgreSQL: any number of importd instances, each thread with its own pool. Nothing is cached, so a key
 * created or revoked anywhere counts on the next request everywhere.
 */
export class PostgresStore implements Store {
  readonly queue: PostgresJobQueue;
  readonly jobs: PostgresJobReads;
  readonly records: PostgresRecords;
  readonly syncs: PostgresSyncs;
  readonly access: PostgresAccessStore;
  readonly webhooks: PostgresWebhooks;
  readonly failures: PostgresFailureLog;
  readonly writesOneAtATime = false;
  private wakeUps?: WakeUps;
  private closed?: Promise<void>;

  private constructor(
    private readonly url: string,
    private readonly pool: pg.Pool,
    db: Db,
    outboxRows: OutboxRows,
    // The serving instance whose connections these are (see liveness.ts); none for a CLI command's store.
    private readonly instance?: string,
    // The serving instance's heartbeat, kept by its server thread's store (not by its worker threads').
    private readonly liveness?: InstanceLiveness,
  ) {
    const any = onPool(pool);
    this.records = new PostgresRecords(db, any);
    this.queue = new PostgresJobQueue(pool, this.records, outboxRows, any, instance);
    this.jobs = new PostgresJobReads(any);
    this.syncs = new PostgresSyncs(any);
    this.access = new PostgresAccessStore(pool, db, any);
    this.failures = new PostgresFailureLog(any);
    this.webhooks = new PostgresWebhooks(pool, any);
  }

  /**
   * Connects and migrates (one instance at a time). `server`: a serving instance, which names its connections after
   * itself and writes its first heartbeat before it runs anything. `outbox`: the webhook deliveries a job's end writes
   * (see OutboxRows).
   */
  static async open(url: string, { server = false, outbox }: { server?: boolean; outbox: OutboxRows }): Promise<PostgresStore> {
    const instance = server ? randomUUID() : undefined;
    const { pool, db } = openPool(url, { max: serverConnections, instance });
    const liveness = instance ? new InstanceLiveness(onPool(pool), instance) : undefined;
    try {
      await migrate(url);
      await liveness?.beat();
    } catch (error) {
      await pool.end();
      throw connectionProblem(error, url);
    }
    liveness?.start();
    return new PostgresStore(url, pool, db, outbox, instance, liveness);
  }

  /** A worker thread's own pool; the server has migrated. */
  static openInThread(handle: PostgresHandle, { outbox }: { outbox: OutboxRows }): PostgresStore {
    const { pool, db } = openPool(handle.url, { max: workerConnections, instance: handle.instance });
    return new PostgresStore(handle.url, pool, db, outbox, handle.instance);
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
  fill(source: CopySource, onTable: OnTable): Promise<CopyReport> {
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
      this.wakeUps?.stop();
      await this.queue.abandonAll();
      await this.pool.end();
    })());
  }
}

const migrationsApplied = statement(`SELECT count(*)::int AS count FROM drizzle.__drizzle_migrations`);

/**
 * Applies the embedded migrations under a session advisory lock, on a connection of their own whose statements may take
 * as long as a migration does (another instance's included, waited for under the lock). Refuses a database another
 * program's tables are in, and one a newer importd has migrated.
 */
async function migrate(url: string): Promise<void> {
  const session = openClient(url, { statementMs: deadlines.bulkStatementMs });
  const rows = async <R extends Record<string, unknown>>(text: string, values?: unknown[]) => (await session.query<R>(text, values)).rows;
  try {
    await session.connect();
    await rows("SELECT pg_advisory_lock(hashtext($1))", [migrationLock]);
    const known = embeddedMigrations();
    await appliedMigrations(session);
    // Drizzle's own migrator, given the embedded migrations instead of a folder (see ../embedded-migrations.ts).
    const internals = drizzle({ client: session }) as unknown as { dialect: { migrate(m: unknown, session: unknown, config: object): Promise<void> }; session: unknown };
    await internals.dialect.migrate(known, internals.session, {});
  } finally {
    // Ending the session lets go of the lock.
    await session.end().catch(() => {});
  }
}
