import { afterAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { testSql, type TestSql } from "../helpers/sql";
import { copiedTableNames } from "../../src/store/copy";
import { SqliteStore } from "../../src/store/sqlite/store";
import { outboxRows } from "../../src/webhooks/outbox";
import { getJob, postJson, waitForJob, importBatch, importAndWait, type JobDocument } from "../helpers/api";
import { createTestDatabase, requirePostgres, testPassword } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { withTestHooks, importd, queryStore, spawnServer, type ServerProcess } from "../helpers/process";
import { Receiver } from "../helpers/receiver";
import { until } from "../helpers/until";
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
  const queryStoreCount = async (dataDir: string, text: string) => ((await queryStore<{ count: number }>(dataDir, text))[0]?.count ?? 0);
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
    const appliance = await spawnServer(dataDir, ["--workers", "1"], 30_000, withTestHooks({ IMPORTD_TEST_KILL_PROCESS_ON_RECORD_ID: "A-KILLS-IT" }));
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

  // SQLite's AUTOINCREMENT counters: the ids never to be handed out again.
  const sqliteSequence = (dataDir: string) => {
    const db = new Database(join(dataDir, "importd.sqlite"), { readonly: true });
    try {
      return db.query("SELECT name, seq FROM sqlite_sequence ORDER BY name").all() as Array<{ name: string; seq: number }>;
    } finally {
      db.close();
    }
  };
  const api = (base: string, key: string, path: string) => fetch(`${base}/v2/${path}`, { headers: { "api-key": key } });

  test("the way down: an appliance copied up to PostgreSQL and back into a new data directory is the same, table for table and row for row; a server there serves it and carries on its ids", async () => {
    // The appliance, with a row in every table: imports, a rejected record, a dry run, an idempotency key, a delete
    // (its tombstone), a sync completed (its marks), a webhook with a delivery, two environments, three keys (one revoked).
    const receiver = await Receiver.start();
    cleanups.push(() => receiver.stop());
    const dataDir = dir("importd-down-");
    const appliance = await spawnServer(dataDir, ["--workers", "1", "--webhook-allow", "127.0.0.1/32"]);
    servers.push(appliance);
    const key = appliance.firstRunKey!;
    const base = `${appliance.url}/default`;
    const subscribed = await fetch(`${base}/v2/webhooks`, { method: "POST", headers: { "api-key": key, "content-type": "application/json" }, body: JSON.stringify({ url: receiver.url }) });
    expect(subscribed.status).toBe(201);
    await seedReferenceData(base, key);
    await importAndWait(base, "assets", key, assets(30));
    const partial = await importAndWait(base, "assets", key, [asset(30), asset(31, { subAreaId: "nowhere" })]);
    expect(partial.importJobStatus).toBe("PartiallySucceeded");
    const dryRun = await waitForJob(base, key, (await (await postJson(base, "assets?dryRun=true", key, [asset(32)])).json()).id);
    expect(dryRun.importJobStatus).toBe("Succeeded");
    expect((await postJson(base, "assets", key, [asset(0, { name: "once" })], { "idempotency-key": "nightly-7" })).status).toBe(202);
    const deleted = await waitForJob(base, key, (await (await postJson(base, "deletions/assets", key, [asset(29).id, asset(28).id])).json()).id);
    expect(deleted.output).toMatchObject({ deleted: 2 });
    const sync = (await (await postJson(base, "syncs", key, { resource: "assets" })).json()) as { id: number };
    await waitForJob(base, key, (await importBatch(base, `assets?sync=${sync.id}`, key, assets(25))).id);
    const completed = await waitForJob(base, key, (await (await postJson(base, `syncs/${sync.id}/complete?maxDeletePercent=100`, key, "")).json()).id);
    expect(completed.importJobStatus).toBe("Succeeded");
    expect((await importd(["env", "create", "second", "--data-dir", dataDir])).code).toBe(0);
    const secondKey = (await importd(["key", "create", "second", "--data-dir", dataDir])).stdout.trim();
    const revokedKey = (await importd(["key", "create", "second", "--data-dir", dataDir])).stdout.trim();
    expect((await importd(["key", "revoke", revokedKey.split("_")[1]!, "--data-dir", dataDir])).code).toBe(0);
    await seedReferenceData(`${appliance.url}/second`, secondKey);
    await importAndWait(`${appliance.url}/second`, "assets", secondKey, assets(3));
    await until(async () => (await queryStoreCount(dataDir, "SELECT count(*) AS count FROM webhook_attempts")) > 0, { what: "a webhook delivery attempted" });
    appliance.proc.kill("SIGTERM");
    expect(await appliance.proc.exited).toBe(0);
    // A job accepted but not yet run, with its payload: the server on the copy runs it.
    const store = SqliteStore.open(dataDir, { outbox: outboxRows });
    const pending = await enqueueJob(store.queue, 1, "Asset", 1, new TextEncoder().encode(JSON.stringify([asset(0, { name: "pending" })])));
    await store.close();

    const original = sqliteRows(dataDir);
    for (const [table, rows] of Object.entries(original)) expect(rows.length, `rows of ${table}`).toBeGreaterThan(0);
    const counters = sqliteSequence(dataDir);

    const target = await database();
    expect((await importd(["storage", "copy", "--data-dir", dataDir, "--to", target.url])).code).toBe(0);
    const down = join(dir("importd-down-copy-"), "data");
    const copied = await importd(["storage", "copy", "--from", target.url, "--data-dir", down]);
    expect(copied.stderr).not.toContain(testPassword);
    expect(copied.stdout).not.toContain(testPassword);
    expect(copied.code).toBe(0);
    expect(copied.stdout).toMatch(/^copied postgres:\/\/importd_test:\*\*\*@.* into .* in [\d.]+ s: 2 environments, 3 API keys, \d+ jobs, \d+ records\n$/);
    expect(copied.stderr).toContain(`importd serve --data-dir ${down}`);

    // Every table, row for row; the ids never handed out again; nothing left beside the database.
    expect(sqliteRows(down)).toEqual(original);
    expect(sqliteSequence(down)).toEqual(counters);
    expect(readdirSync(down).filter((name) => name.startsWith("importd.sqlite"))).toEqual(["importd.sqlite"]);

    // A server on the copy: no first-run key, the same environments, keys, jobs and records; new ids after the old ones.
    const server = await spawnServer(down);
    servers.push(server);
    expect(server.firstRunKey).toBeUndefined();
    const copyBase = `${server.url}/default`;
    const withoutUrl = ({ statusUrl: _, ...job }: JobDocument) => job;
    expect(withoutUrl(await getJob(copyBase, key, partial.id))).toEqual(withoutUrl(partial));
    expect((await (await api(copyBase, key, `status/${partial.id}/rejected`)).json()).items).toHaveLength(1);
    expect(await (await api(copyBase, key, "assets/A-0000003")).json()).toMatchObject({ id: "A-0000003" });
    expect(await (await api(copyBase, key, `assets/${asset(29).id}`)).json()).toMatchObject({ status: 404, deletedByJobId: deleted.id });
    expect(await (await api(copyBase, key, `syncs/${sync.id}`)).json()).toMatchObject({ state: "completed" });
    expect((await api(`${server.url}/second`, secondKey, "jobs")).status).toBe(200);
    expect((await api(`${server.url}/second`, revokedKey, "jobs")).status).toBe(401);
    const replay = await postJson(copyBase, "assets", key, [asset(0, { name: "once" })], { "idempotency-key": "nightly-7" });
    expect((await replay.json()).id).toBe(original.idempotency_keys![0]!.job_id);
    expect(await waitForJob(copyBase, key, pending.id)).toMatchObject({ importJobStatus: "Succeeded", output: { applied: 1 } });
    expect(await (await api(copyBase, key, "assets/A-0000000")).json()).toMatchObject({ name: "pending", lastJobId: pending.id });
    const fresh = await importAndWait(`${server.url}/second`, "assets", secondKey, [asset(90)]);
    expect(fresh.id).toBeGreaterThan(Math.max(...original.jobs!.map((job) => job.id as number)));
    expect(fresh.importJobStatus).toBe("Succeeded");
    server.proc.kill("SIGTERM");
    expect(await server.proc.exited).toBe(0);
  }, 120_000);

  test("the way down killed half-way leaves no database at the real name; the next copy removes what it left and writes the whole", async () => {
    const dataDir = dir("importd-down-kill-");
    expect((await importd(["env", "create", "default", "--data-dir", dataDir])).code).toBe(0);
    const store = SqliteStore.open(dataDir, { outbox: outboxRows });
    for (let i = 0; i < 3; i++) await enqueueJob(store.queue, 1, "Asset", 1, new Uint8Array(64 * 1024).fill(65 + i));
    await store.close();
    const source = await database();
    expect((await importd(["storage", "copy", "--data-dir", dataDir, "--to", source.url])).code).toBe(0);

    // Held by a test hook once it has written its last table, before its commit and rename: killed there, not by luck.
    const down = dir("importd-down-killed-");
    const last = copiedTableNames.at(-1)!;
    const launch = withTestHooks({ IMPORTD_TEST_COPY_HOLDS_AFTER_TABLE: last });
    const copy = Bun.spawn([...launch.command, "storage", "copy", "--from", source.url, "--data-dir", down], { cwd: launch.cwd, env: launch.env, stdout: "ignore", stderr: "pipe" });
    let told = "";
    void (async () => {
      for await (const chunk of copy.stderr) told += new TextDecoder().decode(chunk);
    })();
    await until(() => told, { holds: (said) => said.includes(` ${last} `), what: `the copy held after ${last}`, deadlineMs: 30_000, everyMs: 10 });
    await Bun.sleep(200);
    expect(copy.exitCode).toBeNull();
    const partial = readdirSync(down).find((name) => name.startsWith("importd.sqlite.copying-"));
    expect(partial).toBeDefined();
    copy.kill("SIGKILL");
    await copy.exited;
    const left = readdirSync(down).filter((name) => name.startsWith("importd.sqlite"));
    expect(left).not.toContain("importd.sqlite");
    expect(left).toContain(partial!);

    const again = await importd(["storage", "copy", "--from", source.url, "--data-dir", down]);
    expect(again.stderr).toContain("job_payloads                  3 rows");
    expect(again.code).toBe(0);
    expect(readdirSync(down).filter((name) => name.startsWith("importd.sqlite"))).toEqual(["importd.sqlite"]);
    expect(sqliteRows(down)).toEqual(sqliteRows(dataDir));
  }, 120_000);

  test("the way down refuses, saying why and writing nothing: both directions, a directory with a database or a server on it, a database that is not importd's, empty, or migrated by an older or a newer importd", async () => {
    const source = await database();
    // An importd database: an instance migrated it and made its first environment.
    const instance = await spawnServer(dir("importd-down-instance-"), ["--database-url", source.url]);
    instance.proc.kill("SIGTERM");
    expect(await instance.proc.exited).toBe(0);

    const usage = await Promise.all([
      importd(["storage", "copy", "--from", source.url, "--to", source.url, "--data-dir", dir("importd-down-usage-")]),
      importd(["storage", "copy", "--from", "mysql://u:hidden@h/db", "--data-dir", dir("importd-down-usage-")]),
    ]);
    expect(usage.map((run) => run.code)).toEqual([2, 2]);
    expect(usage[0]!.stderr).toContain("storage copy goes one way");
    expect(usage[0]!.stderr).not.toContain(testPassword);
    expect(usage[1]!.stderr).toContain("--from must be a PostgreSQL URL");
    expect(usage[1]!.stderr).not.toContain("hidden");

    // A directory that holds a database, and one a server runs on: refused before PostgreSQL is read.
    const occupied = dir("importd-down-occupied-");
    const running = await spawnServer(occupied);
    servers.push(running);
    const busy = await importd(["storage", "copy", "--from", source.url, "--data-dir", occupied]);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toContain(`another importd server (pid ${running.proc.pid}) is already running on the data directory ${occupied}; stop it first`);
    running.proc.kill("SIGTERM");
    expect(await running.proc.exited).toBe(0);
    const before = sqliteRows(occupied);
    const full = await importd(["storage", "copy", "--from", source.url, "--data-dir", occupied]);
    expect(full.code).toBe(1);
    expect(full.stderr).toContain(`${occupied} already holds an importd database`);
    expect(sqliteRows(occupied)).toEqual(before);

    // Databases it does not copy: another program's, an empty one, an older importd's (its tables differ), a newer one's. Nothing is left in the directory.
    const blank = async () => {
      const created = await createTestDatabase();
      cleanups.push(created.drop);
      const sql = testSql(created.url);
      cleanups.push(() => sql.end());
      return { url: created.url, sql };
    };
    const foreign = await blank();
    await foreign.sql`CREATE TABLE invoices (id int PRIMARY KEY)`;
    const empty = await blank();
    const older = await database();
    await older.sql`DELETE FROM drizzle.__drizzle_migrations WHERE id = (SELECT max(id) FROM drizzle.__drizzle_migrations)`;
    const newer = await database();
    const newerInstance = await spawnServer(dir("importd-down-instance-"), ["--database-url", newer.url]);
    newerInstance.proc.kill("SIGTERM");
    expect(await newerInstance.proc.exited).toBe(0);
    await newer.sql`INSERT INTO drizzle.__drizzle_migrations (hash, created_at) VALUES ('from-the-future', 0)`;
    for (const [database, message] of [
      [foreign, "the database was not created by importd (it holds the tables invoices)"],
      [empty, "the database holds no importd data (importd has never run on it)"],
      [older, "the database was migrated by an older importd"],
      [newer, "the database was migrated by a newer importd"],
    ] as const) {
      const into = join(dir("importd-down-refused-"), "data");
      const refused = await importd(["storage", "copy", "--from", database.url, "--data-dir", into]);
      expect(refused.stderr).toContain(message);
      expect(refused.code).toBe(1);
      expect(refused.stderr).not.toContain(testPassword);
      expect(readdirSync(into).filter((name) => name.startsWith("importd.sqlite"))).toEqual([]);
    }

    // The importd database goes down into a new directory.
    const into = join(dir("importd-down-ok-"), "data");
    const copied = await importd(["storage", "copy", "--from", source.url, "--data-dir", into]);
    expect(copied.code).toBe(0);
    expect(copied.stdout).toContain("1 environment, 1 API key, 0 jobs, 0 records");
  }, 90_000);

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
