/**
 * The plain way, for baselines: what a hand-written Bun script would do with no service around it.
 * TypeBox's compiled checker for validation, Sets for references, one bun:sqlite prepared statement in one
 * transaction for the upsert, on the same tables (importd's own migrations) with the same durability pragmas.
 */
import { Database } from "bun:sqlite";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { assetRecord } from "../../src/resources/assets";

const root = join(import.meta.dir, "..", "..");
const checkAsset = TypeCompiler.Compile(assetRecord);

export function openPlainDatabase(file: string): Database {
  const db = new Database(file, { create: true, strict: true });
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = FULL");
  const migrations = readdirSync(join(root, "drizzle")).filter((name) => name.endsWith(".sql")).sort();
  for (const name of migrations) {
    for (const statement of readFileSync(join(root, "drizzle", name), "utf8").split("--> statement-breakpoint")) db.exec(statement);
  }
  db.exec("INSERT OR IGNORE INTO environments (id, slug, created_at) VALUES (1, 'bench', '2026-01-01')");
  return db;
}

export function seedPlainReferences(db: Database, references: Record<string, Array<{ id: string; name: string }>>): void {
  const tables: Record<string, string> = { subareas: "sub_areas", assettypes: "asset_types", assetcategories: "asset_categories" };
  for (const [resource, records] of Object.entries(references)) {
    const insert = db.prepare(`INSERT OR REPLACE INTO ${tables[resource]} (environment_id, id, name, updated_at, last_job_id) VALUES (1, ?, ?, '2026-01-01', 0)`);
    db.transaction(() => records.forEach((record) => insert.run(record.id, record.name)))();
  }
}

const ids = (db: Database, table: string) => new Set((db.query(`SELECT id FROM ${table} WHERE environment_id = 1`).values() as string[][]).map((row) => row[0]));

/** Parses and validates a batch of assets; throws on the first invalid record (a baseline need not explain). */
export function parseAndValidate(bytes: Uint8Array): Array<Record<string, any>> {
  const records = JSON.parse(new TextDecoder().decode(bytes)) as Array<Record<string, any>>;
  for (const record of records) {
    if (!checkAsset.Check(record)) throw new Error(`invalid record ${record.id}`);
    if (record.startPoint !== undefined && record.endPoint !== undefined && record.startPoint > record.endPoint) throw new Error(`invalid record ${record.id}`);
  }
  return records;
}

/** read → parse → validate → check references → upsert in one transaction. Returns the records written. */
export function plainImport(db: Database, bytes: Uint8Array): number {
  return upsertAll(db, parseAndValidate(bytes));
}

/**
 * The durable floor (issue 34): what any asynchronous import service must do before it answers 202, then the plain
 * upsert. The body is zstd-compressed on Bun's thread pool while it is parsed and validated (as importd's intake
 * does), and committed with synchronous = FULL in a transaction of its own before the upsert's.
 */
export async function durableImport(db: Database, bytes: Uint8Array): Promise<number> {
  const compressed = Bun.zstdCompress(bytes, { level: 1 });
  const records = parseAndValidate(bytes);
  const payload = await compressed;
  db.exec("CREATE TABLE IF NOT EXISTS durable_payloads (id INTEGER PRIMARY KEY, body BLOB NOT NULL)");
  db.transaction(() => db.query("INSERT INTO durable_payloads (body) VALUES (?)").run(payload)).immediate();
  return upsertAll(db, records);
}

function upsertAll(db: Database, records: Array<Record<string, any>>): number {
  const subAreas = ids(db, "sub_areas");
  const types = ids(db, "asset_types");
  const categories = ids(db, "asset_categories");
  const upsert = db.prepare(
    "INSERT INTO assets (environment_id, id, sub_area_id, name, description, status, asset_category_id, asset_type_id, shape_type, start_point, end_point, " +
      "linear_reference_start, linear_reference_end, location_start, location_end, location_unit, updated_at, last_job_id) " +
      "VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT (environment_id, id) DO UPDATE SET " +
      "sub_area_id = excluded.sub_area_id, name = excluded.name, description = excluded.description, status = excluded.status, " +
      "asset_category_id = excluded.asset_category_id, asset_type_id = excluded.asset_type_id, shape_type = excluded.shape_type, " +
      "start_point = excluded.start_point, end_point = excluded.end_point, linear_reference_start = excluded.linear_reference_start, " +
      "linear_reference_end = excluded.linear_reference_end, location_start = excluded.location_start, location_end = excluded.location_end, " +
      "location_unit = excluded.location_unit, updated_at = excluded.updated_at, last_job_id = excluded.last_job_id",
  );
  const now = new Date().toISOString();
  let written = 0;
  db.transaction(() => {
    for (const r of records) {
      if (!subAreas.has(r.subAreaId) || !types.has(r.assetTypeId) || !categories.has(r.assetCategoryId)) continue;
      const g = r.geolocation;
      upsert.run(r.id, r.subAreaId, r.name, r.description ?? null, r.status, r.assetCategoryId, r.assetTypeId, r.shapeType, r.startPoint ?? null, r.endPoint ?? null,
        g?.linearReferenceStart ?? null, g?.linearReferenceEnd ?? null, g?.locationStart ?? null, g?.locationEnd ?? null, g?.locationUnit ?? null, now);
      written++;
    }
  }).immediate();
  return written;
}

/** Peak resident set of this process so far (VmHWM), in bytes. */
export function peakRss(): number {
  const match = readFileSync("/proc/self/status", "utf8").match(/^VmHWM:\s+(\d+) kB/m);
  return match ? Number(match[1]) * 1024 : process.memoryUsage().rss;
}
