import { Database } from "bun:sqlite";
import { drizzle, type BunSQLiteDatabase } from "drizzle-orm/bun-sqlite";
import { privateDirectory, privateFile } from "../data-directory";
import { join } from "node:path";
import { DatabaseError } from "../errors";
import { ChangeCounter } from "./change-counter";
import { embeddedMigrations } from "./migrations";
import * as schema from "./schema";
import type { WriteLock } from "./write-lock";

export type Db = BunSQLiteDatabase<typeof schema> & { $client: Database };

export const databaseFile = (dataDir: string) => join(dataDir, "importd.sqlite");

// Long enough for a writer to wait out the commit of a 100 MB job in another thread;
// SQLITE_BUSY should never reach a client.
const busyTimeoutMs = 60_000;

const refuse = (file: string, problem: string) =>
  new DatabaseError(`${file} ${problem}. importd has not changed it: restore it from a backup, or move it away to start with an empty database.`);

function asDatabaseError(error: unknown, file: string): unknown {
  const code = (error as { code?: string })?.code;
  if (code === "SQLITE_NOTADB") return refuse(file, "is not an SQLite database, or its header is damaged");
  if (code === "SQLITE_CORRUPT") return refuse(file, "is damaged (SQLite reports corruption)");
  return error;
}

// Statements finalized at once (not cached by query()): a refused connection must really close, so that
// SQLite removes the -wal and -shm files its reads created.
function column(client: Database, sql: string): string[] {
  const statement = client.prepare(sql);
  try {
    return (statement.values() as unknown[][]).map((row) => String(row[0]));
  } finally {
    statement.finalize();
  }
}

/** Refuses a database that importd did not create, or that a newer importd has migrated. Reads only. */
function checkOwnership(client: Database, file: string): void {
  const tables = column(client, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
  if (tables.length === 0) return;
  if (!tables.includes("__drizzle_migrations")) {
    throw refuse(file, `was not created by importd (it holds the tables ${tables.slice(0, 5).join(", ")}${tables.length > 5 ? ", …" : ""})`);
  }
  const applied = column(client, "SELECT hash FROM __drizzle_migrations ORDER BY id");
  const known = embeddedMigrations().map((migration) => migration.hash);
  if (applied.length > known.length) {
    throw refuse(file, `was migrated by a newer importd (${applied.length} migrations; this importd knows ${known.length}): run the newer importd`);
  }
  if (applied.some((hash, index) => hash !== known[index])) throw refuse(file, "has database migrations this importd does not know");
}

// The WriteLock a connection's write transactions take turns on, if its thread shares one (worker threads do).
const writeLocks = new WeakMap<Db, WriteLock>();
// Where each connection counts its write transactions (see change-counter.ts).
const changeCounters = new WeakMap<Db, ChangeCounter>();

/** The data directory's count of write transactions, as this connection keeps it. */
export const changeCounterOf = (db: Db): ChangeCounter => changeCounters.get(db)!;

/**
 * Opens the data directory's database with the pragmas every connection needs (server, worker and CLI alike).
 * `writeLock`: shared with the process's other writing threads; see writeTransaction.
 */
export function openDatabase(dataDir: string, options: { writeLock?: WriteLock } = {}): Db {
  privateDirectory(dataDir);
  const file = databaseFile(dataDir);
  privateFile(file);
  const client = new Database(file, { create: true, strict: true });
  try {
    client.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
    // Before anything writes: switching to WAL alone would rewrite the header of someone else's file.
    checkOwnership(client, file);
    client.exec("PRAGMA journal_mode = WAL");
    // NORMAL is durable in WAL mode against process crashes; FULL also survives a power cut
    // before the next checkpoint, which the 202 promises.
    client.exec("PRAGMA synchronous = FULL");
    client.exec("PRAGMA foreign_keys = ON");
    // No checkpoint inside a commit: by default the commit that takes the WAL past 1,000 pages copies it all
    // into the database file first, and a 100 MB intake would wait for that before its 202. The thread that
    // completed a run checkpoints after its commit instead (see SqliteJobQueue.completeRun); the last
    // connection to close checkpoints too. A WAL left bigger than 64 MB is cut back to that after a checkpoint.
    client.exec("PRAGMA wal_autocheckpoint = 0");
    client.exec(`PRAGMA journal_size_limit = ${64 * 1024 * 1024}`);
  } catch (error) {
    client.close();
    throw asDatabaseError(error, file);
  }
  const db = drizzle({ client, schema }) as Db;
  if (options.writeLock) writeLocks.set(db, options.writeLock);
  changeCounters.set(db, ChangeCounter.open(dataDir));
  return db;
}

/**
 * Runs `fn` in a write transaction (BEGIN IMMEDIATE: the write lock is taken up front, so it never fails
 * half-way for want of it). On a connection opened with a WriteLock, in turn with the process's other threads.
 */
export function writeTransaction<T>(db: Db, fn: (tx: Db) => T): T {
  const changes = changeCounterOf(db);
  let begun = false;
  const transaction = () =>
    db.transaction(
      (tx) => {
        changes.begun();
        begun = true;
        return fn(tx as unknown as Db);
      },
      { behavior: "immediate" },
    );
  const lock = writeLocks.get(db);
  try {
    return lock ? lock.run(transaction) : transaction();
  } finally {
    if (begun) changes.ended();
  }
}

/**
 * writeTransaction for work that awaits (a port's callback). Only for a connection no other task of its thread
 * uses meanwhile: a worker thread runs one task at a time, and over bun:sqlite the awaited work settles in
 * microtasks, so nothing else runs inside the transaction.
 */
export async function writeTransactionAsync<T>(db: Db, fn: () => Promise<T>): Promise<T> {
  const lock = writeLocks.get(db);
  const changes = changeCounterOf(db);
  lock?.acquire();
  try {
    db.$client.exec("BEGIN IMMEDIATE");
    changes.begun();
    try {
      const result = await fn();
      db.$client.exec("COMMIT");
      return result;
    } catch (error) {
      if (db.$client.inTransaction) db.$client.exec("ROLLBACK");
      throw error;
    } finally {
      changes.ended();
    }
  } finally {
    lock?.release();
  }
}

/**
 * A write transaction whose commit is not synced to disk (synchronous = NORMAL for it alone). In WAL mode it
 * still survives a crash of the process, and the next synced commit (any connection's) makes it durable
 * against a power cut too. For writes whose loss in a power cut costs nothing but a retry: a run's claim.
 */
export function unsyncedWriteTransaction<T>(db: Db, fn: (tx: Db) => T): T {
  db.$client.exec("PRAGMA synchronous = NORMAL");
  try {
    return writeTransaction(db, fn);
  } finally {
    db.$client.exec("PRAGMA synchronous = FULL");
  }
}

export function migrate(db: Db): void {
  // drizzle-orm's public migrate() (drizzle-orm/bun-sqlite/migrator) only reads a folder, and there is no
  // drizzle/ folder inside the compiled binary: the migrations are embedded (migrations.ts) and handed to
  // dialect.migrate, which is what the public migrate() calls once it has read the folder.
  const internals = db as unknown as {
    dialect: { migrate(m: unknown, session: unknown, config: object): void };
    session: unknown;
  };
  try {
    internals.dialect.migrate(embeddedMigrations(), internals.session, {});
  } catch (error) {
    throw asDatabaseError(error, db.$client.filename);
  }
}

/** Folds what it can of the WAL into the database file without waiting for readers or writers. */
export function checkpointPassively(db: Db): { busy: boolean; walFrames: number; checkpointedFrames: number } {
  const row = db.$client.query("PRAGMA wal_checkpoint(PASSIVE)").get() as { busy: number; log: number; checkpointed: number };
  return { busy: row.busy !== 0, walFrames: row.log, checkpointedFrames: row.checkpointed };
}

/** Whether every embedded migration has been applied to this database (for the readiness check). */
export function migrationsApplied(db: Db): boolean {
  const { count } = db.$client.query("SELECT count(*) AS count FROM __drizzle_migrations").get() as { count: number };
  return count >= embeddedMigrations().length;
}

/**
 * Closes the connection. With `checkpoint`, first folds the WAL back into the database file, so that the
 * file alone is a complete copy; only the last connection should ask for that. A worker thread that has
 * just closed its connection can hold a lock for a moment longer, so a busy checkpoint is tried again
 * for up to two seconds; if it still cannot run, the WAL stays and the next start replays it.
 */
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
