// The one file that knows the PostgreSQL driver: postgres.js, through drizzle-orm/postgres-js. (Bun's own SQL
// client was tried; its Drizzle adapter stored jsonb as a JSON string, drizzle-orm issue 5287.)
import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import * as schema from "./schema";

export type Sql = postgres.Sql<{ bigint: number }>;
export type ReservedSql = postgres.ReservedSql<{ bigint: number }>;
export type Db = PostgresJsDatabase<typeof schema> & { $client: Sql };

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

export type ConnectOptions = {
  /** Connections at most in this pool (one pool per thread). */
  max: number;
  /** Told of every NOTIFY on the connection (only the listener's pool asks). */
  onnotify?: (channel: string, payload: string) => void;
  /** The connection closed (the listener's pool watches it). */
  onclose?: () => void;
  /** Keep idle connections open (the listener's one connection). */
  keepIdle?: boolean;
  /** The serving instance the connection belongs to, named in its application_name (see liveness.ts). */
  instance?: string;
};

/** What a serving instance's connections' application_name starts with, before the instance's id. */
export const instanceNamePrefix = "importd ";

/** The application_name of a serving instance's connections; a CLI command's are plain "importd". */
export const applicationName = (instance?: string) => (instance ? instanceNamePrefix + instance : "importd");

export function connect(url: string, options: ConnectOptions): { sql: Sql; db: Db } {
  // onnotify and onclose are postgres.js options its types leave out (its own listen() uses them).
  const sql = postgres(url, {
    max: options.max,
    // Idle connections go after 30 s, and each lives at most 30 minutes, so that a pool follows a failover.
    idle_timeout: options.keepIdle ? 0 : 30,
    max_lifetime: options.keepIdle ? null : 30 * 60,
    // After lost connections a request waits for a new one: postgres.js's own backoff between attempts grows to
    // 20 s, and an attempt cut short during start-up (PostgreSQL ending every connection at once) can hang for the
    // whole connect timeout. Both are bounded to a few seconds, so that a request is answered (a 503 at worst)
    // and runs go on soon after PostgreSQL is back (tests/postgres/failover.test.ts).
    connect_timeout: 5,
    backoff: (attempts: number) => Math.min(0.05 * 2 ** attempts, 1),
    // Lost peers are found within a minute even with no statement running.
    keep_alive: 30,
    // Prepared statements per connection: the same few statements run all the time.
    prepare: true,
    onnotice: () => {},
    onnotify: options.onnotify,
    onclose: options.onclose,
    connection: { application_name: applicationName(options.instance) },
    // Job ids are bigint: as numbers (safe up to 2^53) rather than the driver's strings.
    types: { bigint: { to: 20, from: [20], serialize: (value: number) => String(value), parse: (value: string) => Number(value) } },
  } as postgres.Options<{}>) as unknown as Sql;
  const db = drizzle({ client: sql as never, schema }) as unknown as Db;
  return { sql, db };
}
