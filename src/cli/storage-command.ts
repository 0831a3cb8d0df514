import { existsSync } from "node:fs";
import { parseArgs } from "node:util";
import { ConfigError, loadConfig, options } from "../config";
import type { CopyReport } from "../store/copy";
import { DatabaseError } from "../store/errors";
import { redactedUrl } from "../store/postgres/url";
import { PostgresStore } from "../store/postgres/store";
import { databaseFile } from "../store/sqlite/database";
import { SqliteStore } from "../store/sqlite/store";
import { outboxRows } from "../webhooks/outbox";
import { UsageError, type Output } from "./errors";

export const storageUsage = `importd storage copy --data-dir <dir> --to <postgres-url>

  Moves an appliance up to PostgreSQL: copies its whole SQLite database (environments, API keys, records,
  jobs and their documents, pending jobs with their payloads, rejected records, idempotency keys) into an
  empty PostgreSQL database, in one transaction. Stop the appliance's server first; the copy refuses to run
  beside it, and refuses a database that already holds importd data (copy before any instance starts on it).
  Then start the instances with --database-url <postgres-url>: they finish the jobs the appliance left
  pending, in the same order, and the API keys keep working. The data directory is left as it was.

  --data-dir <dir>         the appliance's data directory (env IMPORTD_DATA_DIR; default ./data)
  --to <postgres-url>      postgres://user:password@host:port/database, an empty database

  Exit code: 0 copied, 1 refused or failed (nothing written to the database), 2 usage errors.`;

/** `importd storage copy`: its own flags (--to is no server option). */
export async function storageCommand(argv: string[], env: Record<string, string | undefined>, io: Output): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { "data-dir": { type: "string" }, to: { type: "string" }, help: { type: "boolean", short: "h" } },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) return io.out(storageUsage), 0;
  const [action, ...rest] = positionals;
  if (action !== "copy") throw new UsageError(`unknown storage command '${action ?? ""}': use storage copy --data-dir <dir> --to <postgres-url>`);
  if (rest.length > 0) throw new UsageError(`storage copy takes no arguments, got '${rest.join(" ")}'`);
  if (!values.to) throw new UsageError("missing --to <postgres-url>: the empty PostgreSQL database to copy into");
  const databaseUrl = options.databaseUrl.parse(values.to, "--to");
  if (!databaseUrl) throw new ConfigError("--to must not be empty");
  const { dataDir } = loadConfig({ "data-dir": values["data-dir"] }, env);

  const started = performance.now();
  const report = await copyToPostgres(dataDir, databaseUrl, (table, rows) => io.err(`  ${table.padEnd(18)} ${rows.toLocaleString("en-US").padStart(12)} rows`));
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  io.out(`copied ${dataDir} into ${redactedUrl(databaseUrl)} in ${seconds} s: ${summary(report)}`);
  io.err(`Next: start the instances with --database-url on that database (IMPORTD_DATABASE_URL); they finish the pending jobs.`);
  return 0;
}

/**
 * Copies the database in `dataDir` into the (empty) PostgreSQL database at `databaseUrl`, in one transaction: a copy
 * that fails leaves that database as empty as it was. `onTable` hears of each table once it is copied.
 */
export async function copyToPostgres(dataDir: string, databaseUrl: string, onTable: (name: string, rows: number) => void = () => {}): Promise<CopyReport> {
  // Opening would create an empty database: a mistyped directory must be said, not copied as nothing.
  if (!existsSync(databaseFile(dataDir))) {
    throw new DatabaseError(`there is no importd database in ${dataDir} (no ${databaseFile(dataDir)}): give --data-dir the directory the appliance's server used`);
  }
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

const summary = (report: Record<string, number>) =>
  [
    [report.environments, "environment"],
    [report.api_keys, "API key"],
    [report.jobs, "job"],
    [(report.sub_areas ?? 0) + (report.asset_types ?? 0) + (report.asset_categories ?? 0) + (report.assets ?? 0), "record"],
  ]
    .map(([count, noun]) => `${(count as number).toLocaleString("en-US")} ${noun}${count === 1 ? "" : "s"}`)
    .join(", ");
