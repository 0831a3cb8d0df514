import { Database } from "bun:sqlite";
import { drizzle, type BunSQLiteDatabase } from "drizzle-orm/bun-sqlite";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { embeddedMigrations } from "./migrations";
import * as schema from "./schema";

export type Db = BunSQLiteDatabase<typeof schema> & { $client: Database };

export const databaseFile = (dataDir: string) => join(dataDir, "importd.sqlite");

// Long enough for a writer to wait out the commit of a 100 MB job in another thread;
// SQLITE_BUSY should never reach a client.
const busyTimeoutMs = 60_000;

/** Opens the data directory's database with the pragmas every connection needs (server, worker and CLI alike). */
export function openDatabase(dataDir: string): Db {
  mkdirSync(dataDir, { recursive: true });
  const client = new Database(databaseFile(dataDir), { create: true, strict: true });
  client.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
  client.exec("PRAGMA journal_mode = WAL");
  // NORMAL is durable in WAL mode against process crashes; FULL also survives a power cut
  // before the next checkpoint, which the 202 promises.
  client.exec("PRAGMA synchronous = FULL");
  client.exec("PRAGMA foreign_keys = ON");
  return drizzle({ client, schema }) as Db;
}

export function migrate(db: Db): void {
  // dialect.migrate is what drizzle-orm's own migrator calls once it has read the folder;
  // we hand it the embedded files instead.
  const internals = db as unknown as {
    dialect: { migrate(m: unknown, session: unknown, config: object): void };
    session: unknown;
  };
  internals.dialect.migrate(embeddedMigrations(), internals.session, {});
}

/**
 * Closes the connection. With `checkpoint`, first folds the WAL back into the database file, so that the
 * file alone is a complete copy; only the last connection should ask for that. A worker thread that has
 * just closed its connection can hold a lock for a moment longer, so a busy checkpoint is tried again
 * for up to two seconds; if it still cannot run, the WAL stays and the next start replays it.
 */
/** Whether every embedded migration has been applied to this database (for the readiness check). */
export function migrationsApplied(db: Db): boolean {
  const { count } = db.$client.query("SELECT count(*) AS count FROM __drizzle_migrations").get() as { count: number };
  return count >= embeddedMigrations().length;
}

export function closeDatabase(db: Db, options: { checkpoint?: boolean } = {}): void {
  if (options.checkpoint) {
    for (let attempt = 0; attempt < 200; attempt++) {
      const { busy } = db.$client.query("PRAGMA wal_checkpoint(TRUNCATE)").get() as { busy: number };
      if (!busy) break;
      Bun.sleepSync(10);
    }
  }
  db.$client.close();
}
