import { Database } from "bun:sqlite";
import { afterAll, expect, test } from "bun:test";
import { chownSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { databaseFile } from "../../src/store/sqlite/database";
import { embeddedMigrations } from "../../src/store/sqlite/migrations";
import { getJob, postJson, waitForJob } from "../helpers/api";
import { noStackTrace, ok } from "../helpers/cli";
import { importd, queryStore, spawnServer, type ServerProcess } from "../helpers/process";
import { asset, seedReferenceData } from "../helpers/records";
import { tempDir } from "../helpers/server";

// importd storage backup and restore (DECISIONS 14) on the SQLite appliance, through the CLI as an operator runs it,
// beside a server that is taking imports.

const root = tempDir("importd-backup-");
const servers: ServerProcess[] = [];
afterAll(() => {
  for (const server of servers) server.proc.kill("SIGKILL");
  rmSync(root, { recursive: true, force: true });
});
let dirs = 0;
const newDir = () => join(root, `d${++dirs}`);
const start = async (dir: string) => {
  const server = await spawnServer(dir, ["--workers", "2"]);
  servers.push(server);
  return server;
};

type Acked = { jobId: number; marker: string; count: number; ackedAt: number };

test("a backup taken during a stream of imports, restored into a new directory: its server serves the same environments and keys, every job acknowledged before the backup began (history too) and its records", async () => {
  const source = newDir();
  const server = await start(source);
  const key = server.firstRunKey!;
  await seedReferenceData(`${server.url}/default`, key);
  await ok(["env", "create", "beta", "--data-dir", source]);
  const betaKey = (await ok(["key", "create", "beta", "--data-dir", source])).trim();

  // Each batch its own ids and marker, so that each job's records can be counted after the restore.
  const acked: Acked[] = [];
  const answers: number[] = [];
  let stop = false;
  const stream = (async () => {
    for (let n = 0; !stop; n++) {
      const marker = `batch-${n}`;
      const records = Array.from({ length: 40 }, (_, i) => asset(n * 100 + i, { name: marker }));
      const response = await postJson(`${server.url}/default`, "assets", key, records);
      answers.push(response.status);
      if (response.status === 202) acked.push({ jobId: ((await response.json()) as { id: number }).id, marker, count: records.length, ackedAt: Date.now() });
      else await response.arrayBuffer();
    }
  })();
  while (acked.length < 15) await Bun.sleep(10);

  const backupFile = join(root, "during-imports.sqlite");
  const began = Date.now();
  const backup = await importd(["storage", "backup", "--data-dir", source, "--to", backupFile]);
  const ended = Date.now();
  // A few more after it, still answered 202.
  const afterwards = acked.length + 5;
  while (acked.length < afterwards) await Bun.sleep(10);
  stop = true;
  await stream;

  expect(backup.code).toBe(0);
  expect(backup.stdout).toContain(`backed up ${source} to ${backupFile}`);
  // Without --backup-dir, no backup series: a last success of 0 would set off alerts.
  expect(await (await fetch(`${server.url}/metrics`)).text()).not.toContain("importd_backup");
  expect(answers.every((status) => status === 202)).toBe(true);
  expect(acked.some((job) => job.ackedAt > began && job.ackedAt < ended) || ended - began < 500).toBe(true);
  // Readable by importd's user alone: it holds key hashes and webhook secrets.
  expect(statSync(backupFile).mode & 0o777).toBe(0o600);
  expect(readdirSync(root).filter((name) => name.includes("importd-partial"))).toEqual([]);

  const restored = newDir();
  const restore = await importd(["storage", "restore", "--from", backupFile, "--data-dir", restored]);
  expect(restore.code).toBe(0);
  expect(restore.stdout).toContain(`restored ${backupFile} into ${restored}`);

  const again = await start(restored);
  expect(again.firstRunKey).toBeUndefined();
  const base = `${again.url}/default`;
  // The same keys, in both environments.
  expect((await fetch(`${again.url}/beta/v2/jobs`, { headers: { "api-key": betaKey } })).status).toBe(200);
  const before = acked.filter((job) => job.ackedAt < began);
  expect(before.length).toBeGreaterThanOrEqual(15);
  for (const job of before) {
    // Jobs still pending or running when the backup was taken run again on the restored server.
    const document = await waitForJob(base, key, job.jobId);
    expect(document.importJobStatus).toBe("Succeeded");
    expect(document.output?.applied).toBe(job.count);
  }
  for (const job of before) {
    const [{ count }] = (await queryStore<{ count: number }>(restored, "SELECT count(*) AS count FROM assets WHERE name = ?", job.marker)) as [{ count: number }];
    expect({ marker: job.marker, count }).toEqual({ marker: job.marker, count: job.count });
  }
  // The history: the reference data's jobs, finished before, are there as they were.
  const listed = await (await fetch(`${base}/v2/jobs?limit=500`, { headers: { "api-key": key } })).text();
  for (const job of before) expect(listed).toContain(`"id":${job.jobId}`);
  expect((await getJob(base, key, 1)).importJobStatus).toBe("Succeeded");
}, 120_000);

test("restore checks the file first, refuses a running server's directory and one that holds a database (unless --force), and leaves the directory as it was", async () => {
  const source = newDir();
  const server = await start(source);
  const backupFile = join(root, "refusals.sqlite");
  await ok(["storage", "backup", "--data-dir", source, "--to", backupFile]);

  // The directory the server runs on: its lock says so, and the database is not touched.
  const running = await importd(["storage", "restore", "--from", backupFile, "--data-dir", source]);
  expect(running.code).toBe(1);
  expect(running.stderr.trimEnd().split("\n")).toEqual([
    `importd: another importd server (pid ${server.proc.pid}) is already running on the data directory ${source}; stop it first: a restore replaces the database it uses`,
  ]);
  expect((await fetch(`${server.url}/default/v2/jobs`, { headers: { "api-key": server.firstRunKey! } })).status).toBe(200);

  // A directory that holds a database: refused, then replaced with --force.
  const occupied = newDir();
  await ok(["env", "create", "other", "--data-dir", occupied]);
  const before = readFileSync(databaseFile(occupied));
  const refused = await importd(["storage", "restore", "--from", backupFile, "--data-dir", occupied]);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain(`${occupied} already holds an importd database (${databaseFile(occupied)}): restore into an empty data directory, or give --force`);
  expect(readFileSync(databaseFile(occupied)).equals(before)).toBe(true);
  const forced = await importd(["storage", "restore", "--from", backupFile, "--data-dir", occupied, "--force"]);
  expect(forced.code).toBe(0);
  expect((await ok(["env", "list", "--data-dir", occupied])).split("\t")[0]).toBe("default");
  expect(existsSync(`${databaseFile(occupied)}-wal`) && statSync(`${databaseFile(occupied)}-wal`).size > 0).toBe(false);

  // Files that are not a usable importd database: each said in one line, exit 1, nothing written.
  const notSqlite = join(root, "notes.txt");
  writeFileSync(notSqlite, "these are not the rows you are looking for\n".repeat(200));
  const foreign = join(root, "foreign.sqlite");
  const other = new Database(foreign);
  other.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)");
  other.close();
  const newer = join(root, "newer.sqlite");
  copyFileSync(backupFile, newer);
  const future = new Database(newer);
  future.exec("INSERT INTO __drizzle_migrations (hash, created_at) VALUES ('from-the-future', 0)");
  future.close();
  const damaged = join(root, "damaged.sqlite");
  const bytes = readFileSync(backupFile);
  // The header stays; pages in the middle are overwritten.
  bytes.fill(0x5a, 8192, Math.min(bytes.length, 8192 * 6));
  writeFileSync(damaged, bytes);
  const known = embeddedMigrations().length;
  for (const [file, message] of [
    [join(root, "missing.sqlite"), `there is no backup file ${join(root, "missing.sqlite")}`],
    [notSqlite, `${notSqlite} is not an SQLite database, or it is damaged`],
    [foreign, `${foreign} is not an importd database (it has no importd tables)`],
    [newer, `${newer} was made by a newer importd (${known + 1} migrations; this importd knows ${known}): use that importd, or a newer one`],
    [damaged, `${damaged} is`],
  ] as const) {
    const target = newDir();
    const run = await importd(["storage", "restore", "--from", file, "--data-dir", target]);
    expect({ file, code: run.code }).toEqual({ file, code: 1 });
    expect(run.stderr).toContain(message);
    expect(run.stderr.trimEnd().split("\n")).toHaveLength(1);
    noStackTrace(run.stderr);
    expect(existsSync(databaseFile(target))).toBe(false);
  }
}, 120_000);

test("backup refuses a directory without a database and an existing target, and replaces nothing", async () => {
  const empty = newDir();
  const none = await importd(["storage", "backup", "--data-dir", empty, "--to", join(root, "none.sqlite")]);
  expect(none.code).toBe(1);
  expect(none.stderr).toContain(`there is no importd database in ${empty}`);
  expect(existsSync(empty)).toBe(false);

  const source = newDir();
  await ok(["env", "create", "acme", "--data-dir", source]);
  const existing = join(root, "existing.sqlite");
  writeFileSync(existing, "keep me");
  const refused = await importd(["storage", "backup", "--data-dir", source, "--to", existing]);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain(`${existing} exists already: a backup never replaces a file`);
  expect(readFileSync(existing, "utf8")).toBe("keep me");
}, 60_000);

test("restored by root into the directory of the service's user, the database is that user's, so that the service can open it", async () => {
  if (process.getuid?.() !== 0) return;
  const source = newDir();
  await ok(["env", "create", "acme", "--data-dir", source]);
  const backupFile = join(root, "for-the-service.sqlite");
  await ok(["storage", "backup", "--data-dir", source, "--to", backupFile]);
  const target = newDir();
  mkdirSync(target, { mode: 0o700 });
  chownSync(target, 65534, 65534);
  await ok(["storage", "restore", "--from", backupFile, "--data-dir", target]);
  expect(statSync(databaseFile(target))).toMatchObject({ uid: 65534, gid: 65534 });
  expect(statSync(databaseFile(target)).mode & 0o777).toBe(0o600);
}, 60_000);

test("the backup holds every table of the appliance row for row: environments, keys, jobs, rejections, records, webhooks and their deliveries, tombstones, syncs", async () => {
  const source = newDir();
  const server = await spawnServer(source, ["--workers", "2", "--webhook-allow", "127.0.0.1/32"]);
  servers.push(server);
  const key = server.firstRunKey!;
  const base = `${server.url}/default`;
  const send = async (path: string, body: unknown) => {
    const response = await postJson(base, path, key, body);
    expect({ path, status: response.status }).toEqual({ path, status: path === "webhooks" || path === "syncs" ? 201 : 202 });
    return (await response.json()) as { id: number };
  };
  await send("webhooks", { url: "http://127.0.0.1:9/hook" });
  await seedReferenceData(base, key);
  await waitForJob(base, key, (await send("assets", [asset(1), asset(2), asset(3, { assetTypeId: "nothing" })])).id);
  await waitForJob(base, key, (await send("deletions/assets", [asset(1).id])).id);
  const sync = await send("syncs", { resource: "assets" });
  await waitForJob(base, key, (await send(`assets?sync=${sync.id}`, [asset(2)])).id);
  await waitForJob(base, key, (await send(`syncs/${sync.id}/complete?maxDeletePercent=100`, undefined)).id);
  await ok(["env", "create", "beta", "--data-dir", source]);

  const backupFile = join(root, "every-table.sqlite");
  await ok(["storage", "backup", "--data-dir", source, "--to", backupFile]);
  server.proc.kill("SIGTERM");
  await server.proc.exited;
  await ok(["storage", "backup", "--data-dir", source, "--to", join(root, "every-table-stopped.sqlite")]);

  const contents = (file: string) => {
    const db = new Database(file, { readonly: true });
    try {
      // A table WITHOUT ROWID (tombstones) in its key's order.
      const tables = db.query("SELECT m.name, t.wr FROM sqlite_master m JOIN pragma_table_list t ON t.schema = 'main' AND t.name = m.name WHERE m.type = 'table' ORDER BY m.name").all() as Array<{ name: string; wr: number }>;
      return Object.fromEntries(tables.map(({ name, wr }) => [name, db.query(`SELECT * FROM "${name}"${wr ? "" : " ORDER BY rowid"}`).all()]));
    } finally {
      db.close();
    }
  };
  const live = contents(databaseFile(source));
  for (const table of ["environments", "api_keys", "jobs", "job_rejections", "assets", "webhooks", "webhook_deliveries", "tombstones", "syncs"]) {
    expect({ table, rows: (live[table] as unknown[]).length > 0 }).toEqual({ table, rows: true });
  }
  // Taken while it ran, or once stopped: the same rows (nothing was written in between but the webhook's attempts).
  const stopped = contents(join(root, "every-table-stopped.sqlite"));
  expect(Object.keys(stopped)).toEqual(Object.keys(live));
  expect(stopped).toEqual(live);
  const during = contents(backupFile);
  for (const table of Object.keys(live).filter((name) => !name.startsWith("webhook_"))) expect({ table, rows: during[table] }).toEqual({ table, rows: live[table] });
}, 120_000);
