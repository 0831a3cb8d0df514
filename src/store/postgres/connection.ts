// The one file that knows the PostgreSQL driver: node-postgres (pg) and its pool, through drizzle-orm/node-postgres for
// the queries Drizzle builds, and directly for the queue's and the upsert's own SQL (why not postgres.js or Bun's
// client: docs/reliability.md, section 8).
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { drizzle, type NodePgDatabase } from "drizzle-orm/node-postgres";
import pg from "pg";
import { parse as parseUrl, toClientConfig } from "pg-connection-string";
import { from as copyFrom } from "pg-copy-streams";
import { DatabaseError } from "../errors";
import * as schema from "./schema";
import { withoutSecrets } from "./url";

export type Db = NodePgDatabase<typeof schema>;
export type Row = Record<string, unknown>;

/**
 * How long importd waits for PostgreSQL. A statement with no answer by its deadline (a frozen backend, a network that
 * drops packets, a lock held by such a connection) fails, and its connection is closed: a request gets a 503, not a hang.
 */
export const deadlines = {
  /** Opening a connection, or waiting for one of the pool's. */
  connectMs: 5_000,
  statementMs: 10_000,
  /** A statement whose work grows with the data: a run's records, a payload, a purge, a migration. */
  bulkStatementMs: 300_000,
  /** Idle before the first TCP keepalive probe, on both ends. */
  keepAliveMs: 30_000,
} as const;

/** What a serving instance's connections' application_name starts with, before the instance's id. */
export const instanceNamePrefix = "importd ";

/** The application_name of a serving instance's connections; a CLI command's are plain "importd". */
export const applicationName = (instance?: string) => (instance ? instanceNamePrefix + instance : "importd");

// bigint (job ids) as numbers, safe up to 2^53, per connection rather than in the driver's global table. (Drizzle's
// queries bring their own parsers: its bigint columns are declared { mode: "number" }.)
export const types = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === pg.types.builtins.INT8 && format !== "binary" ? Number : pg.types.getTypeParser(oid, format as "text")) as typeof pg.types.getTypeParser,
};

// The server ends a statement whose client has gone (checked every 2 s), and finds a lost client of an idle
// connection by TCP keepalive, so that neither goes on holding its locks.
const serverSide = ["client_connection_check_interval=2000", `tcp_keepalives_idle=${deadlines.keepAliveMs / 1000}`, "tcp_keepalives_interval=10", "tcp_keepalives_count=3"];

/** The URL's settings (sslmode and sslrootcert as libpq reads them), then importd's own, which the URL cannot change. */
function connectionConfig(url: string, instance: string | undefined, statementMs: number): pg.ClientConfig {
  let fromUrl: pg.ClientConfig;
  try {
    fromUrl = toClientConfig(parseUrl(url, { useLibpqCompat: true }));
  } catch (error) {
    // Reading sslrootcert, sslcert or sslkey (never repeating the URL: it may hold a password).
    const { path, message } = error as { path?: string; message: string };
    throw new DatabaseError(withoutSecrets(path ? `--database-url names the file ${path}, which cannot be read: ${message}` : `--database-url: ${message}`, url));
  }
  return {
    ...fromUrl,
    application_name: applicationName(instance),
    connectionTimeoutMillis: deadlines.connectMs,
    query_timeout: statementMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: deadlines.keepAliveMs,
    options: [fromUrl.options, ...serverSide.map((setting) => `-c ${setting}`)].filter(Boolean).join(" "),
    types,
  };
}

type ConnectOptions = { instance?: string; statementMs?: number };

/**
 * A thread's pool, with both of the error listeners pg needs: the pool's, for a connection lost while idle, and each
 * connection's own, for one lost while checked out (its statement fails with the error; unheard, it ends the process).
 */
export function openPool(url: string, { max, instance, statementMs = deadlines.statementMs }: ConnectOptions & { max: number }): { pool: pg.Pool; db: Db } {
  const pool = new pg.Pool({
    ...connectionConfig(url, instance, statementMs),
    max,
    // Idle connections go after 30 s, and each lives at most 30 minutes, so that a pool follows a failover.
    idleTimeoutMillis: 30_000,
    maxLifetimeSeconds: 30 * 60,
  });
  pool.on("error", () => {});
  pool.on("connect", (client) => client.on("error", () => {}));
  const db = drizzle({ client: pool, schema });
  return { pool, db };
}

/** A connection of its own, outside any pool (the listener's, the migrations'), with its error listener. */
export function openClient(url: string, { instance, statementMs = deadlines.statementMs }: ConnectOptions = {}): pg.Client {
  const client = new pg.Client(connectionConfig(url, instance, statementMs));
  client.on("error", () => {});
  return client;
}

export type Statement = (...values: unknown[]) => pg.QueryConfig;

/**
 * A named statement: `text`, with $1, $2, … for its values, planned once per connection. `bulk`: one whose work grows
 * with the data, given the bulk deadline.
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
 * A transaction on a connection of its own. A statement that fails without the server's answer (a lost connection, a
 * deadline passed) leaves the connection in doubt: nothing more is sent on it, and it is closed, never pooled again.
 * (drizzle's transaction() would send its ROLLBACK there, wait for it, and pool the connection again.)
 */
export class Transaction implements Queryable {
  private lost?: Error;
  // Rolling back or committing: nothing more may be sent. Ended: the connection is let go of.
  private ending = false;
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

  query<R extends Row = Row>(statement: pg.QueryConfig | string): Promise<R[]> {
    return this.send(async () => (await this.client.query<R>(statement)).rows);
  }

  /**
   * COPY … FROM STDIN, fed `chunks`, within the bulk deadline. A COPY the server refuses (a bad value, a full disk)
   * rejects with its SQLSTATE, the transaction then aborted.
   */
  copyIn(text: string, chunks: Iterable<string | Uint8Array> | AsyncIterable<string | Uint8Array>): Promise<void> {
    return this.send(() => pipeline(Readable.from(chunks), this.client.query(Object.assign(copyFrom(text), { query_timeout: deadlines.bulkStatementMs }))));
  }

  private async send<T>(work: () => Promise<T>): Promise<T> {
    if (this.lost) throw this.lost;
    if (this.ending) throw new Error("statement on a transaction that has ended");
    try {
      return await work();
    } catch (error) {
      this.failed(error);
      throw error;
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
    if (this.ending) return;
    this.ending = true;
    if (!this.lost) await this.client.query("ROLLBACK").catch((error) => this.failed(error));
    this.end();
  }

  private end(): void {
    if (this.ended) return;
    this.ending = this.ended = true;
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
