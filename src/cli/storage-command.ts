import { existsSync } from "node:fs";
import { parseArgs } from "node:util";
import { ConfigError, loadConfig, options, type TestHooks } from "../config";
import type { CopyReport, OnTable } from "../store/copy";
import { DatabaseError } from "../store/errors";
import { redactedUrl } from "../store/postgres/url";
import { databaseFile } from "../store/sqlite/database";
import { UsageError, type Output } from "./errors";

export const storageUsage = `importd storage: the appliance's SQLite data, backed up, restored, and copied to or from PostgreSQL

importd storage backup --data-dir <dir> --to <file>

  Backs up the appliance while its server runs (imports keep being accepted): a consistent copy of the whole
  database (environments, API keys, jobs and their history, records, webhooks, deletes, syncs) in one file. It is
  written under a temporary name beside <file> (<file>.importd-partial-<pid>), checked (SQLite's integrity_check, an
  importd schema this importd knows), synced to disk, and only then renamed to <file>: a backup stopped half-way
  leaves nothing at <file>, and the next backup into that directory removes what it left. The data directory is only
  read. Keep the TLS files too (docs/operations/backup.md).

  --data-dir <dir>         the appliance's data directory (env IMPORTD_DATA_DIR; default ./data)
  --to <file>              the backup file to write; it must not exist (the file holds key hashes and webhook
                           secrets: it is made readable by this user only)

importd storage restore --from <file> --data-dir <dir> [--force]

  Puts a backup in place as the data directory's database. The file is checked first (integrity, an importd
  database, no migrations newer than this importd), the restore refuses to run while a server runs on the directory,
  and refuses a directory that already holds a database unless --force (that database is then replaced: back it up
  first). Then start the server on the directory: it serves the backup's environments, keys, jobs and records, and
  runs again the jobs that were pending or running when the backup was taken.

  --from <file>            the backup file (from storage backup, or --backup-dir); it is left as it is
  --data-dir <dir>         the data directory to restore into (env IMPORTD_DATA_DIR; default ./data)
  --force                  replace the database the directory holds

importd storage copy --data-dir <dir> --to <postgres-url>

  Moves an appliance up to PostgreSQL: copies its whole SQLite database (environments, API keys, records,
  jobs and their documents, pending jobs with their payloads, rejected records, idempotency keys) into an
  empty PostgreSQL database, in one transaction. Stop the appliance's server first; the copy refuses to run
  beside it, and refuses a database that already holds importd data (copy before any instance starts on it).
  Then start the instances with --database-url <postgres-url>: they finish the jobs the appliance left
  pending, in the same order, and the API keys keep working. The data directory is left as it was.

  --data-dir <dir>         the appliance's data directory (env IMPORTD_DATA_DIR; default ./data)
  --to <postgres-url>      postgres://user:password@host:port/database, an empty database

importd storage copy --from <postgres-url> --data-dir <dir>

  The way down, or out: copies a whole PostgreSQL importd database (the same tables, ids kept, new ids carrying
  on after the last ones) into a new SQLite database in an empty data directory. It reads one consistent snapshot
  and writes nothing there; instances may run meanwhile, but what they do afterwards is not in the copy: stop them
  first to move for good. The database is written under a temporary name in the directory and renamed into
  place only when whole. It refuses a directory that holds a database, or that a server runs on, and a database
  that is not importd's or whose migrations differ from this importd's. Then start the server on the directory:
  it runs again the jobs that were pending or running at the copy.

  --from <postgres-url>    postgres://user:password@host:port/database, an importd database (left as it is)
  --data-dir <dir>         the data directory to write (env IMPORTD_DATA_DIR; default ./data), empty or new

  Exit code: 0 done, 1 refused or failed (nothing written at the target), 2 usage errors.`;

const actions = "use storage backup --data-dir <dir> --to <file>, storage restore --from <file> --data-dir <dir>, storage copy --data-dir <dir> --to <postgres-url>, or storage copy --from <postgres-url> --data-dir <dir>";

/** `importd storage backup | restore | copy`: their own flags (--to, --from and --force are no server options). */
export async function storageCommand(argv: string[], env: Record<string, string | undefined>, io: Output, testHooks?: TestHooks): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { "data-dir": { type: "string" }, to: { type: "string" }, from: { type: "string" }, force: { type: "boolean" }, help: { type: "boolean", short: "h" } },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) return io.out(storageUsage), 0;
  const [action, ...rest] = positionals;
  if (action !== "copy" && action !== "backup" && action !== "restore") throw new UsageError(`unknown storage command '${action ?? ""}': ${actions}`);
  if (rest.length > 0) throw new UsageError(`storage ${action} takes no arguments, got '${rest.join(" ")}'`);
  if (values.from !== undefined && action === "backup") throw new UsageError("--from is for storage restore and storage copy; storage backup takes --to");
  if (values.force && action !== "restore") throw new UsageError(`--force is for storage restore only`);
  if (action === "restore") {
    if (values.to !== undefined) throw new UsageError("storage restore takes --from <file> (the backup) and --data-dir <dir>, not --to");
    if (!values.from) throw new UsageError("missing --from <file>: the backup file to restore");
    const { dataDir } = sqliteAppliance(action, env, values["data-dir"]);
    const { restoreDatabase } = await import("../store/sqlite/backup");
    const report = restoreDatabase(values.from, dataDir, { force: values.force === true });
    io.out(`restored ${values.from} into ${dataDir} (${megabytes(report.bytes)}, ${report.migrations} migrations)`);
    io.err(`Next: start the server on it: importd serve --data-dir ${dataDir} (it runs again the jobs that were pending when the backup was taken)`);
    return 0;
  }
  if (action === "backup") {
    if (!values.to) throw new UsageError("missing --to <file>: the backup file to write");
    const { dataDir } = sqliteAppliance(action, env, values["data-dir"]);
    const { backupDatabase } = await import("../store/sqlite/backup");
    const report = backupDatabase(dataDir, values.to);
    io.out(`backed up ${dataDir} to ${values.to} in ${report.seconds.toFixed(1)} s (${megabytes(report.bytes)}, integrity checked)`);
    io.err(`Keep the TLS certificate and key with it, and the server's settings: docs/operations/backup.md`);
    return 0;
  }
  // One command, two directions: the flag that names the PostgreSQL database says which way.
  if (values.to !== undefined && values.from !== undefined) {
    throw new UsageError("storage copy goes one way: --to <postgres-url> copies the data directory up into PostgreSQL, --from <postgres-url> copies PostgreSQL down into the data directory; give one of them");
  }
  if (!values.to && !values.from) {
    throw new UsageError("missing --to <postgres-url> (the empty PostgreSQL database to copy the data directory into) or --from <postgres-url> (the PostgreSQL database to copy into an empty data directory)");
  }
  const flag = values.from !== undefined ? "--from" : "--to";
  const databaseUrl = options.databaseUrl.parse((values.from ?? values.to)!, flag);
  if (!databaseUrl) throw new ConfigError(`${flag} must not be empty`);
  const { dataDir } = loadConfig({ "data-dir": values["data-dir"] }, env);

  const started = performance.now();
  const onTable = async (table: string, rows: number) => {
    io.err(`  ${table.padEnd(18)} ${rows.toLocaleString("en-US").padStart(12)} rows`);
    // A copy caught mid-way, for the test that kills it there: it waits, in its transaction, to be killed.
    if (table === testHooks?.copyHoldsAfterTable) await new Promise(() => {});
  };
  const seconds = () => ((performance.now() - started) / 1000).toFixed(1);
  if (flag === "--from") {
    const report = await copyFromPostgres(databaseUrl, dataDir, onTable);
    io.out(`copied ${redactedUrl(databaseUrl)} into ${dataDir} in ${seconds()} s: ${summary(report)}`);
    io.err(`Next: start the server on it: importd serve --data-dir ${dataDir} (it runs again the jobs that were pending or running at the copy)`);
    return 0;
  }
  const report = await copyToPostgres(dataDir, databaseUrl, onTable);
  io.out(`copied ${dataDir} into ${redactedUrl(databaseUrl)} in ${seconds()} s: ${summary(report)}`);
  io.err(`Next: start the instances with --database-url on that database (IMPORTD_DATABASE_URL); they finish the pending jobs.`);
  return 0;
}

/** The configuration of an appliance on SQLite: one set up for PostgreSQL (IMPORTD_DATABASE_URL) is backed up otherwise. */
function sqliteAppliance(action: string, env: Record<string, string | undefined>, dataDir: string | undefined) {
  const config = loadConfig({ "data-dir": dataDir }, env);
  if (config.databaseUrl !== undefined) {
    throw new ConfigError(
      `storage ${action} is for the appliance's SQLite database, and IMPORTD_DATABASE_URL says this importd uses PostgreSQL: back that up with pg_dump, or base backups and WAL archiving (docs/operations/backup.md)`,
    );
  }
  return config;
}

const megabytes = (bytes: number) => `${(bytes / (1024 * 1024)).toFixed(1)} MB`;

/**
 * Copies the database in `dataDir` into the (empty) PostgreSQL database at `databaseUrl`, in one transaction: a copy
 * that fails leaves that database as empty as it was. `onTable` hears of each table once it is copied.
 */
export async function copyToPostgres(dataDir: string, databaseUrl: string, onTable: OnTable = () => {}): Promise<CopyReport> {
  // Opening would create an empty database: a mistyped directory must be said, not copied as nothing.
  if (!existsSync(databaseFile(dataDir))) {
    throw new DatabaseError(`there is no importd database in ${dataDir} (no ${databaseFile(dataDir)}): give --data-dir the directory the appliance's server used`);
  }
  // Loaded here, not with the command: a usage error or a backup need neither store's code.
  const [{ SqliteStore }, { PostgresStore }, { outboxRows }] = await Promise.all([import("../store/sqlite/store"), import("../store/postgres/store"), import("../webhooks/outbox")]);
  const source = SqliteStore.openStopped(dataDir);
  try {
    const target = await PostgresStore.open(databaseUrl, { outbox: outboxRows });
    try {
      return await source.snapshot((tables) => target.fill(tables, onTable));
    } finally {
      await target.close();
    }
  } finally {
    await source.close();
  }
}

/**
 * Copies the importd database at `databaseUrl` into a new database in `dataDir`, which must hold none (and no server may
 * run on it): from one snapshot, written under a temporary name and renamed into place once whole. The PostgreSQL
 * database is only read.
 */
export async function copyFromPostgres(databaseUrl: string, dataDir: string, onTable: OnTable = () => {}): Promise<CopyReport> {
  const [{ NewSqliteDatabase }, { withPostgresSnapshot }] = await Promise.all([import("../store/sqlite/fill"), import("../store/postgres/dump")]);
  const target = NewSqliteDatabase.claim(dataDir);
  try {
    return await withPostgresSnapshot(databaseUrl, (source) => target.fill(source, onTable));
  } finally {
    target.release();
  }
}

const summary = (report: Record<string, number>) =>
  [
    [report.environments, "environment"],
    [report.api_keys, "API key"],
    [report.jobs, "job"],
    [(report.sub_areas ?? 0) + (report.asset_types ?? 0) + (report.asset_categories ?? 0) + (report.assets ?? 0), "record"],
  ]
    .map(([count, noun]) => `${(count as number).toLocaleString("en-US")} ${noun}${count === 1 ? "" : "s"}`)
    .join(", ");
