import { expect, test } from "bun:test";
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { closeDatabase, migrate, openDatabase } from "../../src/store/sqlite/database";
import { groupLimits, runNext } from "../../src/jobs/apply";
import { embeddedMigrations, embeddedMigrationTags } from "../../src/store/sqlite/migrations";
import { SqliteStore } from "../../src/store/sqlite/store";
import journal from "../../drizzle/meta/_journal.json";
import postgresJournal from "../../drizzle-pg/meta/_journal.json";
import { embeddedMigrationTags as postgresMigrationTags } from "../../src/store/postgres/migrations";
import { outboxRows } from "../../src/webhooks/outbox";
import { resourceByPath } from "../../src/resources/registry";
import { tempDir } from "../helpers/server";

test("every drizzle-kit migration is embedded, in journal order", () => {
  const files = readdirSync(join(import.meta.dir, "../../drizzle")).filter((name) => name.endsWith(".sql")).map((name) => name.replace(/\.sql$/, "")).sort();
  expect(embeddedMigrationTags().sort()).toEqual(files);
  expect(journal.entries.map((entry) => entry.tag)).toEqual(files);
});

test("every drizzle-kit migration for PostgreSQL is embedded, in journal order", () => {
  const files = readdirSync(join(import.meta.dir, "../../drizzle-pg")).filter((name) => name.endsWith(".sql")).map((name) => name.replace(/\.sql$/, "")).sort();
  expect(postgresMigrationTags().sort()).toEqual(files);
  expect(postgresJournal.entries.map((entry) => entry.tag)).toEqual(files);
});

test("migrating creates every table and is idempotent", () => {
  const dir = tempDir();
  const db = openDatabase(dir);
  migrate(db);
  migrate(db);
  const tables = db.$client.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as Array<{ name: string }>;
  expect(tables.map((table) => table.name)).toEqual(["__drizzle_migrations", "api_keys", "asset_categories", "asset_types", "assets", "environments", "idempotency_keys", "job_payloads", "job_rejections", "job_sequences", "jobs", "sub_areas", "sync_records", "syncs", "tombstones", "webhook_attempts", "webhook_deliveries", "webhooks"]);
  expect(db.$client.query("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" });
  closeDatabase(db);
  rmSync(dir, { recursive: true, force: true });
});

/** The data directory's database as an older version left it: its first `count` migrations applied, no later one. */
function migratedUpTo(dir: string, count: number) {
  const db = openDatabase(dir);
  const internals = db as unknown as { dialect: { migrate(m: unknown, session: unknown, config: object): void }; session: unknown };
  internals.dialect.migrate(embeddedMigrations().slice(0, count), internals.session, {});
  return db;
}

test("upgrading a database with jobs numbers them in their id order, and new jobs come after them", async () => {
  const dir = tempDir();
  // The database as the version before job sequences left it: migrated up to 0003, two jobs in one environment.
  const db = migratedUpTo(dir, 4);
  db.$client.exec("INSERT INTO environments (slug, created_at) VALUES ('old', '2026-01-01T00:00:00.000Z')");
  for (const status of ["Succeeded", "Pending"]) {
    db.$client.query("INSERT INTO jobs (environment_id, type, status, record_count, created_at) VALUES (1, 'SubArea', ?, 1, '2026-01-01T00:00:00.000Z')").run(status);
  }
  db.$client.exec("INSERT INTO job_payloads (job_id, body) VALUES (2, X'5B5D')");

  migrate(db);
  expect(db.$client.query("SELECT id, sequence FROM jobs ORDER BY id").all()).toEqual([{ id: 1, sequence: 1 }, { id: 2, sequence: 2 }]);
  closeDatabase(db);

  const store = SqliteStore.open(dir, { outbox: outboxRows });
  const [answer] = await store.queue.enqueue([{ environmentId: 1, type: "SubArea", recordCount: 0, body: new TextEncoder().encode("[]") }]);
  const run = await store.queue.claimRun({ token: "t", environmentId: 1, alone: true }, groupLimits);
  expect(run!.jobs.map((job) => job.id)).toEqual([2]);
  expect(answer!.conflict ? undefined : answer!.job.id).toBe(3);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

test("upgrading tombstones to a table keyed by their record keeps them, and hands out no position again, not even a purged one's", async () => {
  const dir = tempDir();
  // The database as the version before left it: migrated up to 0010, three tombstones, the newest then ended.
  const db = migratedUpTo(dir, 11);
  db.$client.exec("INSERT INTO environments (slug, created_at) VALUES ('old', '2026-01-01T00:00:00.000Z')");
  for (const id of ["a", "b", "c"]) db.$client.query("INSERT INTO tombstones (environment_id, resource, id, job_id, deleted_at) VALUES (1, 'subareas', ?, 7, '2026-01-02T00:00:00.000Z')").run(id);
  db.$client.exec("DELETE FROM tombstones WHERE id = 'c'");

  migrate(db);
  expect(db.$client.query("SELECT position, id, job_id AS jobId FROM tombstones ORDER BY position").all()).toEqual([{ position: 1, id: "a", jobId: 7 }, { position: 2, id: "b", jobId: 7 }]);
  expect(db.$client.query("SELECT wr FROM pragma_table_list WHERE name = 'tombstones'").get()).toEqual({ wr: 1 });
  closeDatabase(db);

  const store = SqliteStore.open(dir, { outbox: outboxRows });
  const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
  await store.queue.enqueue([{ environmentId: 1, type: "SubArea", recordCount: 2, body: encode([{ id: "d", name: "D" }, { id: "e", name: "E" }]) }]);
  await store.queue.enqueue([{ environmentId: 1, type: "SubArea", recordCount: 2, body: encode(["e", "d"]), operation: "delete" }]);
  await runNext(store.queue, 1, { token: "t" });
  const subareas = resourceByPath("subareas")!;
  expect((await store.records.tombstones(subareas, 1, 10)).map(({ id, position }) => ({ id, position }))).toEqual([
    { id: "a", position: 1 },
    { id: "b", position: 2 },
    { id: "e", position: 4 },
    { id: "d", position: 5 },
  ]);
  expect((await store.records.tombstone(subareas, 1, "b"))?.deletedByJobId).toBe(7);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});
