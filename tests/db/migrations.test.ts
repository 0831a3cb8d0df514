import { expect, test } from "bun:test";
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { closeDatabase, migrate, openDatabase } from "../../src/store/sqlite/database";
import { embeddedMigrationTags } from "../../src/store/sqlite/migrations";
import journal from "../../drizzle/meta/_journal.json";
import { tempDir } from "../helpers/server";

test("every drizzle-kit migration is embedded, in journal order", () => {
  const files = readdirSync(join(import.meta.dir, "../../drizzle")).filter((name) => name.endsWith(".sql")).map((name) => name.replace(/\.sql$/, "")).sort();
  expect(embeddedMigrationTags().sort()).toEqual(files);
  expect(journal.entries.map((entry) => entry.tag)).toEqual(files);
});

test("migrating creates every table and is idempotent", () => {
  const dir = tempDir();
  const db = openDatabase(dir);
  migrate(db);
  migrate(db);
  const tables = db.$client.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as Array<{ name: string }>;
  expect(tables.map((table) => table.name)).toEqual(["__drizzle_migrations", "api_keys", "asset_categories", "asset_types", "assets", "environments", "idempotency_keys", "job_payloads", "job_rejections", "jobs", "sub_areas"]);
  expect(db.$client.query("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" });
  closeDatabase(db);
  rmSync(dir, { recursive: true, force: true });
});
