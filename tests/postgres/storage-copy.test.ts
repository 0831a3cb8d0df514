import { afterAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { testSql, type TestSql } from "../helpers/sql";
import { copiedTableNames } from "../../src/store/sqlite/dump";
import { SqliteStore } from "../../src/store/sqlite/store";
import { outboxRows } from "../../src/webhooks/outbox";
import { getJob, postJson, waitForJob, importBatch, importAndWait, type JobDocument } from "../helpers/api";
import { requirePostgres, testPassword } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { fromSourceWith, importd, spawnServer, type ServerProcess } from "../helpers/process";
import { asset, assets, seedReferenceData } from "../helpers/records";
import { enqueueJob, tempDir } from "../helpers/server";

// importd storage copy: a stopped appliance's data directory, with jobs in every state, into an empty
// PostgreSQL database; then instances on it finish what the appliance left.

if (requirePostgres("importd storage copy")) {
  const servers: ServerProcess[] = [];
  const cleanups: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    for (const server of servers) server.proc.kill("SIGKILL");
    for (const cleanup of cleanups.reverse()) await cleanup();
  });
  const dir = (prefix: string) => {
    const path = tempDir(prefix);
    cleanups.push(() => rmSync(path, { recursive: true, force: true }));
    return path;
  };
  const database = async () => {
    const created = await freshPostgresDatabase();
    cleanups.push(created.drop);
    // bigint as numbers, as importd reads them and as SQLite gives them.
    const sql = testSql(created.url);
    cleanups.push(() => sql.end());
    return { url: created.url, sql };
  };

  // Every row of every copied table, keyed by table, in primary-key order, blobs as hex: the two databases'
  // contents compared as values.
  const sqliteRows = (dataDir: string) => {
    const db = new Database(join(dataDir, "importd.sqlite"), { readonly: true });
    try {
      return Object.fromEntries(copiedTableNames.map((table) => [table, normalized(db.query(`SELECT * FROM "${table}" ORDER BY ${orderOf(table)}`).all() as Row[])]));
    } finally {
      db.close();
    }
  };
  const postgresRows = async (sql: TestSql) => {
    const tables: Record<string, Row[]> = {};
    for (const table of copiedTableNames) tables[table] = normalized((await sql.unsafe(`SELECT * FROM "${table}" ORDER BY ${orderOf(table)}`)) as unknown as Row[]);
    return tables;
  };

  test("an appliance with jobs succeeded, partly succeeded, failed, interrupted mid-run and pending moves to PostgreSQL whole; instances there finish its jobs in order, with its keys", async () => {
    // The appliance: reference data, two environments, a revoked key, finished jobs of every outcome, an
    // idempotency key; then a job that kills the server while it runs (left Processing).
    const dataDir = dir("importd-copy-");
    const appliance = await spawnServer(dataDir, ["--workers", "1"], 30_000, fromSourceWith({ IMPORTD_TEST_KILL_PROCESS_ON_RECORD_ID: "A-KILLS-IT" }));
    servers.push(appliance);
    const key = appliance.firstRunKey!;
    const base = `${appliance.url}/default`;
    await seedReferenceData(base, key);
    const succeeded = await importAndWait(base, "assets", key, assets(50));
    const partial = await importAndWait(base, "assets", key, [asset(50), asset(51, { subAreaId: "nowhere" }), asset(52)]);
    const failed = await importAndWait(base, "assets", key, [asset(53, { assetTypeId: "nothing" })]);
    expect([succeeded.importJobStatus, partial.importJobStatus, failed.importJobStatus]).toEqual(["Succeeded", "PartiallySucceeded", "Failed"]);
    const idempotent = await postJson(base, "assets", key, [asset(0, { name: "replayed" })], { "idempotency-key": "nightly-1" });
    expect(idempotent.status).toBe(202);
    // A delete job (its operation column) and the tombstone it leaves (and the position a reader's cursor may hold).
    const deletion = await postJson(base, "deletions/assets", key, [asset(49).id]);
    expect(deletion.status).toBe(202);
    const deleted = await waitForJob(base, key, (await deletion.json()).id);
    expect(deleted).toMatchObject({ operation: "delete", output: { deleted: 1 } });
    const replayedJob = (await idempotent.json()) as JobDocument;
    await waitForJob(base, key, replayedJob.id);
    // A sync left open, with the ids its job sent (its marks): it is completed on PostgreSQL.
    const opened = await postJson(base, "syncs", key, { resource: "assets" });
    expect(opened.status).toBe(201);
    const sync = (await opened.json()) as { id: number };
    const joined = await waitForJob(base, key, (await importBatch(base, `assets?sync=${sync.id}`, key, assets(10))).id);
    expect(joined.importJobStatus).toBe("Succeeded");

    expect((await importd(["env", "create", "second", "--data-dir", dataDir])).code).toBe(0);
    const secondKey = (await importd(["key", "create", "second", "--data-dir", dataDir])).stdout.trim();
    const revokedKey = (await importd(["key", "create", "second", "--data-dir", dataDir])).stdout.trim();
    expect((await importd(["key", "revoke", revokedKey.split("_")[1]!, "--data-dir", dataDir])).code).toBe(0);
    await seedReferenceData(`${appliance.url}/second`, secondKey);
    await importAndWait(`${appliance.url}/second`, "assets", secondKey, assets(5));

    // The run may kill the server before its 202 is written: the job is found in the database instead.
    await postJson(base, "assets", key, [asset(0, { name: "interrupted" }), asset(1, { id: "A-KILLS-IT" })]).catch(() => undefined);
    expect(await appliance.proc.exited).not.toBe(0);

    // Jobs accepted but not yet run, as the killed server left them; and a job purged after it (its id is
    // never to be handed out again).
    const store = SqliteStore.open(dataDir, { outbox: outboxRows });
    const interrupted = store.db.$client.query("SELECT id FROM jobs WHERE status = 'Processing'").get() as { id: number };
    const encode = (records: unknown[]) => new TextEncoder().encode(JSON.stringify(records));
    const pendingFirst = await enqueueJob(store.queue, 1, "Asset", 2, encode([asset(0, { name: "pending first" }), asset(60)]));
    const pendingLast = await enqueueJob(store.queue, 1, "Asset", 1, encode([asset(0, { name: "pending last" })]));
    const purged = await enqueueJob(store.queue, 2, "Asset", 1, encode([asset(0)]));
    store.db.$client.run("DELETE FROM jobs WHERE id = ?", [purged.id]);
    await store.close();

    const before = sqliteRows(dataDir);
    const statuses = before.jobs!.map((job) => job.status);
    for (const status of ["Succeeded", "PartiallySucceeded", "Failed", "Processing", "Pending"]) expect(statuses).toContain(status);
    expect(before.job_payloads!.length).toBeGreaterThanOrEqual(3);
    expect(before.job_rejections!.length).toBe(2);
    expect(before.idempotency_keys!.length).toBe(1);
    expect(before.tombstones!.map((row) => row.id)).toEqual([asset(49).id]);
    expect(before.syncs!.map((row) => row.id)).toEqual([sync.id]);
    expect(before.sync_records!).toHaveLength(10);

    // Every table of the appliance is one the copy knows.
    const sqlite = new Database(join(dataDir, "importd.sqlite"), { readonly: true });
    const tables = (sqlite.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('sqlite_sequence', '__drizzle_migrations')").all() as Array<{ name: string }>).map((row) => row.name);
    sqlite.close();
    expect(tables.sort()).toEqual([...copiedTableNames].sort());

    const target = await database();
    const copied = await importd(["storage", "copy", "--data-dir", dataDir, "--to", target.url]);
    expect(copied.stderr).not.toContain(testPassword);
    expect(copied.stdout).not.toContain(testPassword);
    expect(copied.code).toBe(0);
    expect(copied.stdout).toMatch(/^copied .* into postgres:\/\/importd_test:\*\*\*@.* in [\d.]+ s: 2 environments, 3 API keys, 16 jobs, \d+ records\n$/);
    expect(copied.stderr).toContain("assets");

    // Value for value, every row; and the appliance's data directory as it was.
    expect(await postgresRows(target.sql)).toEqual(before);
    expect(sqliteRows(dataDir)).toEqual(before);

    // A second copy into the same database is refused and changes nothing.
    const again = await importd(["storage", "copy", "--data-dir", dataDir, "--to", target.url]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("the database already holds importd data (in environments, api_keys, job_sequences, jobs,");
    expect(again.stderr).not.toContain(testPassword);
    expect(await postgresRows(target.sql)).toEqual(before);

    // Two instances on the copy: no first-run key (the environments came along), the appliance's keys work,
    // the revoked one does not; the interrupted job is run again, then the pending ones, in order.
    const instances = [] as ServerProcess[];
    for (let i = 0; i < 2; i++) {
      const instance = await spawnServer(dir("importd-copy-instance-"), ["--database-url", target.url]);
      servers.push(instance);
      instances.push(instance);
      expect(instance.firstRunKey).toBeUndefined();
    }
    const [a, b] = instances.map((instance) => `${instance.url}/default`) as [string, string];
    const finished = await waitForJob(a, key, pendingLast.id);
    expect(finished.importJobStatus).toBe("Succeeded");
    expect(await waitForJob(b, key, interrupted.id)).toMatchObject({ importJobStatus: "Succeeded", output: { applied: 2 } });
    expect(await waitForJob(b, key, pendingFirst.id)).toMatchObject({ importJobStatus: "Succeeded", output: { applied: 2 } });
    const [{ attempts }] = (await target.sql`SELECT attempts FROM jobs WHERE id = ${interrupted.id}`) as unknown as [{ attempts: number }];
    expect(attempts).toBe(2);
    const record = await (await fetch(`${b}/v2/assets/A-0000000`, { headers: { "api-key": key } })).json();
    expect(record).toMatchObject({ name: "pending last", lastJobId: pendingLast.id });
    expect((await fetch(`${a}/v2/assets/A-KILLS-IT`, { headers: { "api-key": key } })).status).toBe(200);

    // Finished jobs, their rejected records and the idempotency window came along.
    const withoutUrl = ({ statusUrl: _, ...job }: JobDocument) => job;
    expect(withoutUrl(await getJob(b, key, partial.id))).toEqual(withoutUrl(partial));
    const rejected = await (await fetch(`${a}/v2/status/${partial.id}/rejected`, { headers: { "api-key": key } })).json();
    expect(rejected.items).toHaveLength(1);
    expect(rejected.items[0]).toMatchObject({ index: 1, record: { id: "A-0000051", subAreaId: "nowhere" } });
    const replay = await postJson(b, "assets", key, [asset(0, { name: "replayed" })], { "idempotency-key": "nightly-1" });
    expect((await replay.json()).id).toBe(replayedJob.id);

    // The deleted record is still deleted, by the same job; a deletion there takes a position after the appliance's.
    expect(await (await fetch(`${a}/v2/assets/${asset(49).id}`, { headers: { "api-key": key } })).json()).toMatchObject({ status: 404, deletedByJobId: deleted.id });
    const cursor = (await (await fetch(`${a}/v2/deletions/assets`, { headers: { "api-key": key } })).json()).resumeCursor;
    expect((await waitForJob(b, key, (await (await postJson(b, "deletions/assets", key, [asset(48).id])).json()).id)).output).toMatchObject({ deleted: 1 });
    expect((await (await fetch(`${a}/v2/deletions/assets?after=${cursor}`, { headers: { "api-key": key } })).json()).items.map((item: { id: string }) => item.id)).toEqual([asset(48).id]);

    // The sync is still open with what it was sent, and completes there; a new sync's id comes after it.
    const moved = await (await fetch(`${b}/v2/syncs/${sync.id}`, { headers: { "api-key": key } })).json();
    expect(moved).toMatchObject({ state: "open", recordsSent: 10, jobs: [{ id: joined.id, operation: "upsert" }] });
    const dryRun = await waitForJob(a, key, (await (await postJson(a, `syncs/${sync.id}/complete?dryRun=true&maxDeletePercent=100`, key, "")).json()).id);
    expect(dryRun.output).toMatchObject({ rejected: 0 });
    expect((dryRun.output as { total: number }).total).toBeGreaterThan(0);
    expect(((await (await postJson(b, "syncs", key, { resource: "assets" })).json()) as { id: number }).id).toBeGreaterThan(sync.id);

    const second = `${instances[0]!.url}/second`;
    expect((await fetch(`${second}/v2/jobs`, { headers: { "api-key": secondKey } })).status).toBe(200);
    expect((await fetch(`${second}/v2/jobs`, { headers: { "api-key": revokedKey } })).status).toBe(401);

    // New ids carry on after the appliance's last ones, the purged job's included.
    const fresh = await importBatch(second, "assets", secondKey, [asset(70)]);
    expect(fresh.id).toBeGreaterThan(purged.id);
    expect((await waitForJob(second, secondKey, fresh.id)).importJobStatus).toBe("Succeeded");
    const createdKey = await importd(["key", "create", "second", "--database-url", target.url]);
    expect(Number(createdKey.stdout.trim().split("_")[1])).toBeGreaterThan(Number(revokedKey.split("_")[1]));
  }, 120_000);

  test("refuses, saying why and writing nothing: a running server on the data directory, a directory with no database, an unreachable database, and bad arguments", async () => {
    const dataDir = dir("importd-copy-running-");
    const running = await spawnServer(dataDir);
    servers.push(running);
    const target = await database();

    const busy = await importd(["storage", "copy", "--data-dir", dataDir, "--to", target.url]);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toContain(`another importd server (pid ${running.proc.pid}) is already running on the data directory ${dataDir}; stop it first`);
    const [{ count }] = (await target.sql`SELECT count(*)::int AS count FROM environments`) as unknown as [{ count: number }];
    expect(count).toBe(0);
    running.proc.kill("SIGTERM");
    expect(await running.proc.exited).toBe(0);

    const missing = join(dir("importd-copy-missing-"), "nothing-here");
    const none = await importd(["storage", "copy", "--data-dir", missing, "--to", target.url]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain(`there is no importd database in ${missing}`);
    expect(await Bun.file(missing).exists()).toBe(false);

    const wrongPassword = target.url.replace(testPassword, "not-the-password");
    const denied = await importd(["storage", "copy", "--data-dir", dataDir, "--to", wrongPassword]);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain("cannot log in to postgres://importd_test:***@");
    expect(denied.stderr).not.toContain("not-the-password");

    const usage = await Promise.all([
      importd(["storage", "copy", "--data-dir", dataDir]),
      importd(["storage", "copy", "--data-dir", dataDir, "--to", "mysql://u:hidden@h/db"]),
      importd(["storage", "move", "--data-dir", dataDir, "--to", target.url]),
    ]);
    expect(usage.map((run) => run.code)).toEqual([2, 2, 2]);
    expect(usage[0]!.stderr).toContain("missing --to <postgres-url>");
    expect(usage[1]!.stderr).toContain("--to must be a PostgreSQL URL");
    expect(usage[1]!.stderr).not.toContain("hidden");
    expect(usage[2]!.stderr).toContain("unknown storage command 'move'");

    // With all that refused, the copy of the stopped directory goes through.
    const copied = await importd(["storage", "copy", "--data-dir", dataDir, "--to", target.url]);
    expect(copied.code).toBe(0);
    expect(copied.stdout).toContain("1 environment, 1 API key, 0 jobs, 0 records");
  }, 60_000);
}

type Row = Record<string, unknown>;

// Primary keys: the order both databases list a table's rows in.
function orderOf(table: string): string {
  if (table === "job_sequences") return "environment_id";
  if (table === "job_payloads") return "job_id";
  if (table === "job_rejections") return "job_id, position";
  if (table === "idempotency_keys") return "environment_id, key";
  if (table === "webhook_attempts") return "delivery_id, attempt";
  if (table === "tombstones") return "position";
  if (table === "sync_records") return "sync_id, id";
  if (["sub_areas", "asset_types", "asset_categories", "assets"].includes(table)) return "environment_id, id";
  return "id";
}

// Blobs as hex; booleans as SQLite keeps them (0 and 1).
const normalized = (rows: Row[]) =>
  rows.map((row) =>
    Object.fromEntries(Object.entries(row).map(([column, value]) => [column, value instanceof Uint8Array ? Buffer.from(value).toString("hex") : typeof value === "boolean" ? Number(value) : value])),
  );
