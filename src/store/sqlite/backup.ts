// Backup and restore of the appliance's SQLite database (DECISIONS 14): `importd storage backup` / `restore`, and the
// server's scheduled backups (backup-thread.ts).
import { Database } from "bun:sqlite";
import { chmodSync, chownSync, closeSync, copyFileSync, existsSync, fsyncSync, openSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileMode, privateDirectory } from "../data-directory";
import { DatabaseError } from "../errors";
import { databaseFile } from "./database";
import { embeddedMigrations } from "./migrations";
import { lockDataDirectory } from "./server-lock";

/**
 * The copy is SQLite's own `VACUUM INTO`, from a read-only connection: one read transaction, so one consistent
 * snapshot of every table, and in WAL mode a reader never blocks the server's writers (imports keep their 202).
 * bun:sqlite has no binding for the online backup API, and `Database.serialize()` builds the whole database in
 * memory (a 1 GB database, a 1 GB buffer): docs/operations/backup.md has the figures.
 * While it runs, no checkpoint can take the WAL past the snapshot it reads, so the WAL grows by what is written
 * meanwhile; the first checkpoint after it folds that back (journal_size_limit then cuts the file back to 64 MB).
 */

/** What a kill in the middle leaves beside the target: named for importd and the process, removed by the next backup. */
const partialMark = ".importd-partial-";
// VACUUM INTO writes the file through a rollback journal of its own, <partial>-journal: a kill leaves that too.
const partialName = /\.importd-partial-(\d+)(-journal)?$/;

// A backup waits this long for a lock: in WAL mode only a moment's (a WAL reset, a recovery), never a writer's.
const busyTimeoutMs = 60_000;

export type BackupReport = { bytes: number; seconds: number; migrations: number };

/**
 * Copies the data directory's database to `target` (a file that must not exist), beside a running server or a
 * stopped one: under a temporary name next to it, checked (integrity_check, an importd schema this importd knows),
 * synced to disk, and only then renamed to `target`. Whatever stops it (an error, a kill), nothing is at `target`
 * and the data directory is as it was.
 */
export function backupDatabase(dataDir: string, target: string): BackupReport {
  const started = performance.now();
  const source = databaseFile(dataDir);
  // A read-only open of a missing file fails with an unhelpful "unable to open": a mistyped directory is said.
  if (!existsSync(source)) {
    throw new DatabaseError(`there is no importd database in ${dataDir} (no ${source}): give --data-dir the directory the appliance's server uses`);
  }
  const to = resolve(target);
  const directory = dirname(to);
  if (!existsSync(directory) || !statSync(directory).isDirectory()) throw new DatabaseError(`cannot write the backup ${target}: ${directory} is not a directory`);
  if (existsSync(to)) throw new DatabaseError(`${target} exists already: a backup never replaces a file; remove it, or name another`);
  removeLeftovers(directory);

  const partial = `${to}${partialMark}${process.pid}`;
  try {
    // Made empty and 0600 first (VACUUM INTO takes an empty file): the copy holds key hashes and webhook secrets.
    closeSync(openSync(partial, "wx", fileMode));
    const client = new Database(source, { readonly: true });
    try {
      client.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
      client.prepare("VACUUM INTO ?").run(partial);
    } finally {
      client.close();
    }
    const { migrations } = checkImportdDatabase(partial);
    // SQLite does not sync what VACUUM INTO writes: the file, then the rename in its directory.
    syncFile(partial);
    renameSync(partial, to);
    syncFile(directory);
    return { bytes: statSync(to).size, seconds: (performance.now() - started) / 1000, migrations };
  } catch (error) {
    rmSync(partial, { force: true });
    rmSync(`${partial}-journal`, { force: true });
    if (error instanceof DatabaseError) throw error;
    throw new DatabaseError(`the backup to ${target} failed, nothing was written there: ${describeFailure(error)}`);
  }
}

/**
 * Checks that `file` is a whole importd database this importd can serve: SQLite's integrity_check passes, it has
 * importd's tables and migrations, none newer than this importd's. Reads only. Answers how many migrations it has.
 */
export function checkImportdDatabase(file: string): { migrations: number } {
  let client: Database;
  try {
    client = new Database(file, { readonly: true });
  } catch (error) {
    throw new DatabaseError(`${file} cannot be opened as an SQLite database: ${describeFailure(error)}`);
  }
  try {
    const column = (sql: string) => (client.query(sql).values() as unknown[][]).map((row) => String(row[0]));
    let problems: string[];
    try {
      problems = column("PRAGMA integrity_check");
    } catch (error) {
      throw new DatabaseError(`${file} is not an SQLite database, or it is damaged: ${describeFailure(error)}`);
    }
    if (problems.join() !== "ok") throw new DatabaseError(`${file} is damaged: SQLite's integrity_check says ${problems.slice(0, 3).join("; ")}`);
    const tables = column("SELECT name FROM sqlite_master WHERE type = 'table'");
    if (!tables.includes("__drizzle_migrations") || !tables.includes("environments") || !tables.includes("jobs")) {
      throw new DatabaseError(`${file} is not an importd database (it has no importd tables)`);
    }
    const applied = column("SELECT hash FROM __drizzle_migrations ORDER BY id");
    const known = embeddedMigrations().map((migration) => migration.hash);
    if (applied.length > known.length) {
      throw new DatabaseError(`${file} was made by a newer importd (${applied.length} migrations; this importd knows ${known.length}): use that importd, or a newer one`);
    }
    if (applied.some((hash, index) => hash !== known[index])) throw new DatabaseError(`${file} has database migrations this importd does not know`);
    return { migrations: applied.length };
  } finally {
    client.close();
  }
}

/**
 * Puts the backup `from` in place as the data directory's database: checked first, refused while a server runs on the
 * directory (its lock is held meanwhile, so that none starts), and refused over a database already there unless
 * `force`. The file is copied beside the database, synced, the old database's -wal and -shm removed (replayed onto
 * the restored file they would damage it), and renamed over it. `from` is left as it was.
 */
export function restoreDatabase(from: string, dataDir: string, { force = false } = {}): { migrations: number; bytes: number } {
  if (!existsSync(from) || !statSync(from).isFile()) throw new DatabaseError(`there is no backup file ${from}`);
  const { migrations } = checkImportdDatabase(from);
  const lock = lockDataDirectory(dataDir, "stop it first: a restore replaces the database it uses");
  try {
    const file = databaseFile(dataDir);
    for (const name of readdirSync(dataDir)) if (/^importd\.sqlite\.restoring-\d+$/.test(name)) rmSync(join(dataDir, name), { force: true });
    if (existsSync(file) && !force) {
      throw new DatabaseError(
        `${dataDir} already holds an importd database (${file}): restore into an empty data directory, or give --force to replace that database (back it up first if you may want it)`,
      );
    }
    privateDirectory(dataDir);
    const restoring = `${file}.restoring-${process.pid}`;
    try {
      copyFileSync(from, restoring);
      moveIntoPlace(restoring, dataDir);
    } catch (error) {
      rmSync(restoring, { force: true });
      throw new DatabaseError(`the restore into ${dataDir} failed: ${describeFailure(error)}`);
    }
    return { migrations, bytes: statSync(file).size };
  } finally {
    lock.release();
  }
}

/**
 * Makes `file`, a whole database written beside the data directory's (restored, or copied from PostgreSQL), the data
 * directory's database: private to its owner, synced, the old database's -wal, -shm and -journal removed, and renamed
 * over it (a kill before the rename leaves the old database, or none, at the real name; never half of one).
 */
export function moveIntoPlace(file: string, dataDir: string): void {
  const target = databaseFile(dataDir);
  chmodSync(file, fileMode);
  // Written by root (without sudo -u), the file is given to the data directory's owner, as SQLite does with its
  // -wal and -shm files: else the service's user could not open it, and would not start.
  if (process.getuid?.() === 0) {
    const owner = statSync(dataDir);
    chownSync(file, owner.uid, owner.gid);
  }
  syncFile(file);
  // In this order: the old WAL beside the new file would be replayed onto it.
  rmSync(`${target}-wal`, { force: true });
  rmSync(`${target}-shm`, { force: true });
  rmSync(`${target}-journal`, { force: true });
  renameSync(file, target);
  syncFile(dataDir);
}

/** Removes what backups killed in the middle left in `directory` (their process gone); a running one's is left alone. */
export function removeLeftovers(directory: string): string[] {
  const removed: string[] = [];
  for (const name of readdirSync(directory)) {
    const pid = partialName.exec(name)?.[1];
    if (pid === undefined || isRunning(Number(pid))) continue;
    rmSync(join(directory, name), { force: true });
    removed.push(name);
  }
  return removed;
}

function isRunning(pid: number): boolean {
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
}

function syncFile(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** A failed write's cause in a few words: a full disk, a place that cannot be written, or the error's message. */
export const describeFailure = (error: unknown) => {
  const code = (error as { code?: string })?.code;
  if (code === "SQLITE_FULL" || code === "ENOSPC") return "the disk is full";
  if (code === "SQLITE_READONLY" || code === "EROFS" || code === "EACCES" || code === "SQLITE_CANTOPEN") return `cannot write there (${(error as Error).message})`;
  return (error as Error)?.message ?? String(error);
};

/** A scheduled backup's name in --backup-dir: sorts by when it was taken, and is all that --backup-keep ever removes. */
export const scheduledBackupName = (at: Date) => `importd-${at.toISOString().replace(/[-:]/g, "")}.sqlite`;
const scheduledBackup = /^importd-\d{8}T\d{6}\.\d{3}Z\.sqlite$/;

/** Removes the oldest of importd's own scheduled backups in `directory` beyond the newest `keep`; answers their names. */
export function pruneBackups(directory: string, keep: number): string[] {
  const ours = readdirSync(directory).filter((name) => scheduledBackup.test(name)).sort();
  const old = ours.slice(0, Math.max(0, ours.length - keep));
  for (const name of old) rmSync(join(directory, name), { force: true });
  return old;
}
