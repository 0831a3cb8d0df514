// The one file that knows the PostgreSQL driver: node-postgres (pg) and its pool, through drizzle-orm/node-postgres
// for the queries Drizzle builds, and directly for the queue's and the upsert's own SQL. (postgres.js 3.4 left
// queries unsettled after lost connections, threw an uncatchable TypeError on a closed reserved connection and never
// reported a failing COPY; Bun's SQL client's Drizzle adapter stores jsonb as a JSON string. The measurements are in
// the team's research on drivers, summed up in docs/reliability.md.)
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { drizzle, type NodePgDatabase } from "drizzle-orm/node-postgres";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import * as schema from "./schema";

export type Db = NodePgDatabase<typeof schema> & { $client: pg.Pool };
export type Row = Record<string, unknown>;

/**
 * How long importd waits for PostgreSQL. Every statement has a deadline: one that has had no answer by then (a
 * backend that is stopped, a network that drops packets, a lock held by such a connection) fails, and its connection
 * is closed rather than used again, so that a request is answered (503) instead of hanging. TCP keepalive finds a
 * lost peer of an idle connection; the server checks every 2 s whether the client of a running statement is still
 * there, so a statement importd gave up on does not go on holding its locks.
 */
export const deadlines = {
  /** Opening a connection, or waiting for one of the pool's. */
  connectMs: 5_000,
  /** Any statement. */
  statementMs: 10_000,
  /** A statement that writes a run's records (a chunk, a COPY and its merge): a 100 MB batch takes seconds. */
  bulkStatementMs: 300_000,
  /** The first TCP keepalive probe of an idle connection. */
  keepAliveMs: 30_000,
} as const;

/** The URL as it may be shown: without its password. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(a database URL that cannot be parsed)";
  }
}

/** What a serving instance's connections' application_name starts with, before the instance's id. */
export const instanceNamePrefix = "importd ";

/** The application_name of a serving instance's connections; a CLI command's are plain "importd". */
export const applicationName = (instance?: string) => (instance ? instanceNamePrefix + instance : "importd");

// Job ids and sequence numbers are bigint: as numbers (safe up to 2^53) rather than the driver's strings. Given per
// connection, not set in the driver's global table, so that nothing else in the process is changed.
export const types = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === pg.types.builtins.INT8 && format !== "binary" ? Number : pg.types.getTypeParser(oid, format as "text")) as typeof pg.types.getTypeParser,
};

/** The settings of every connection importd opens to `url`, for `instance` (see liveness.ts). */
function connectionConfig(url: string, instance?: string): pg.ClientConfig {
  return {
    connectionString: url,
    application_name: applicationName(instance),
    connectionTimeoutMillis: deadlines.connectMs,
    query_timeout: deadlines.statementMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: deadlines.keepAliveMs,
    options: "-c client_connection_check_interval=2000",
    types,
  };
}

/**
 * A thread's pool of at most `max` connections, with both of the error listeners pg needs: the pool's, for a
 * connection lost while idle (the pool has dropped it), and each connection's own, for one lost while checked out
 * (its statement, or the next, fails with the error; without a listener the error would end the process).
 */
export function openPool(url: string, { max, instance }: { max: number; instance?: string }): { pool: pg.Pool; db: Db } {
  const pool = new pg.Pool({
    ...connectionConfig(url, instance),
    max,
    // Idle connections go after 30 s, and each lives at most 30 minutes, so that a pool follows a failover.
    idleTimeoutMillis: 30_000,
    maxLifetimeSeconds: 30 * 60,
  });
  pool.on("error", () => {});
  pool.on("connect", (client) => client.on("error", () => {}));
  const db = drizzle({ client: pool, schema }) as Db;
  return { pool, db };
}

/** A connection of its own, outside any pool (the listener's), with its error listener. */
export function openClient(url: string, instance?: string): pg.Client {
  const client = new pg.Client(connectionConfig(url, instance));
  client.on("error", () => {});
  return client;
}

export type Statement = (...values: unknown[]) => pg.QueryConfig;

/**
 * A named statement: `text`, with $1, $2, … for its values, is planned once per connection, then only bound and
 * executed (a connection that is lost takes its plans along; its successor plans afresh). Called with the values.
 * `bulk`: a statement that writes a run's records, given the bulk deadline.
 */
export function statement(text: string, { bulk = false } = {}): Statement {
  const name = `importd_${Bun.hash(text).toString(36)}`;
  const deadline = bulk ? { query_timeout: deadlines.bulkStatementMs } : {};
  return (...values) => ({ name, text, values, ...deadline });
}

/** Something statements can be sent to: the pool (any connection) or a transaction (its own). */
export type Queryable = { query<R extends Row = Row>(statement: pg.QueryConfig | string): Promise<R[]> };

/** The pool as a Queryable: each statement on any free connection, committed on its own. */
export const onPool = (pool: pg.Pool): Queryable => ({
  query: async <R extends Row>(statement: pg.QueryConfig | string) => (await pool.query<R>(statement)).rows,
});

/**
 * A transaction on a connection of its own, from BEGIN to COMMIT or ROLLBACK. A statement that fails without an
 * answer from the server (a lost connection, a deadline passed) leaves the connection in doubt: nothing more is sent
 * on it, and it is closed, not pooled again. (drizzle's transaction() would send its ROLLBACK on such a connection and
 * wait for it, then pool it again.)
 */
export class Transaction implements Queryable {
  private lost?: Error;
  private ended = false;

  private constructor(private readonly client: pg.PoolClient) {}

  /** Opens a transaction on a connection of `pool`. */
  static async begin(pool: pg.Pool): Promise<Transaction> {
    const transaction = new Transaction(await pool.connect());
    try {
      await transaction.query("BEGIN");
    } catch (error) {
      await transaction.rollback();
      throw error;
    }
    return transaction;
  }

  async query<R extends Row = Row>(statement: pg.QueryConfig | string): Promise<R[]> {
    if (this.lost) throw this.lost;
    if (this.ended) throw new Error("statement on a transaction that has ended");
    try {
      return (await this.client.query<R>(statement)).rows;
    } catch (error) {
      this.failed(error);
      throw error;
    }
  }

  /**
   * COPY … FROM STDIN, fed `chunks`. A COPY the server refuses (a bad value, a full disk) rejects with its SQLSTATE,
   * the transaction then aborted; one unanswered past the bulk deadline closes the connection.
   */
  async copyIn(text: string, chunks: Iterable<string | Buffer>): Promise<void> {
    if (this.lost) throw this.lost;
    const stream = this.client.query(copyFrom(text));
    const deadline = setTimeout(() => {
      this.lost = new Error(`COPY had no answer within ${deadlines.bulkStatementMs / 1000} s`);
      this.client.connection.stream.destroy(this.lost);
    }, deadlines.bulkStatementMs);
    try {
      await pipeline(Readable.from(chunks), stream);
    } catch (error) {
      this.failed(error);
      throw this.lost ?? error;
    } finally {
      clearTimeout(deadline);
    }
  }

  private failed(error: unknown): void {
    // An answer from the server (a constraint, a full disk) leaves the connection as good as before.
    if (!(error instanceof pg.DatabaseError) || error.severity === "FATAL" || error.severity === "PANIC") this.lost ??= error as Error;
  }

  async commit(): Promise<void> {
    try {
      await this.query("COMMIT");
    } finally {
      this.end();
    }
  }

  /** Rolls back and lets go of the connection; nothing to do after commit(). Never throws. */
  async rollback(): Promise<void> {
    if (this.ended) return;
    if (!this.lost) await this.query("ROLLBACK").catch(() => {});
    this.end();
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.client.release(this.lost ?? false);
  }
}

/** `fn` in a transaction: committed if it resolves, rolled back if it throws. */
export async function inTransaction<T>(pool: pg.Pool, fn: (transaction: Transaction) => Promise<T>): Promise<T> {
  const transaction = await Transaction.begin(pool);
  try {
    const result = await fn(transaction);
    await transaction.commit();
    return result;
  } finally {
    await transaction.rollback();
  }
}
