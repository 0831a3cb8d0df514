import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { testSql } from "../helpers/sql";
import { closeDatabase, migrate, openDatabase } from "../../src/store/sqlite/database";
import { requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { tempDir } from "../helpers/server";

// Both backends' migrations must build the same tables, columns, nullability, keys and indexes (types differ
// by dialect: text/integer/real in SQLite, text/integer/bigint/double precision in PostgreSQL), so that the
// two schemas, written by hand in two files, cannot drift apart.

type Shape = {
  columns: Record<string, string[]>; // table → "column NOT NULL" / "column NULL"
  primaryKeys: Record<string, string[]>;
  indexes: string[]; // "table(columns) unique?"
  foreignKeys: string[]; // "table(column) → table(column)"
};

function sqliteShape(): Shape {
  const dir = tempDir();
  const db = openDatabase(dir);
  migrate(db);
  const client = db.$client;
  const tables = (client.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '__drizzle%' ORDER BY name").all() as Array<{ name: string }>).map((row) => row.name);
  const shape: Shape = { columns: {}, primaryKeys: {}, indexes: [], foreignKeys: [] };
  for (const table of tables) {
    const columns = client.query(`PRAGMA table_info("${table}")`).all() as Array<{ name: string; notnull: number; pk: number }>;
    shape.columns[table] = columns.map((column) => `${column.name} ${column.notnull || column.pk ? "NOT NULL" : "NULL"}`).sort();
    shape.primaryKeys[table] = columns.filter((column) => column.pk > 0).sort((a, b) => a.pk - b.pk).map((column) => column.name);
    for (const index of client.query(`PRAGMA index_list("${table}")`).all() as Array<{ name: string; unique: number; origin: string }>) {
      if (index.origin === "pk") continue;
      const columns = (client.query(`PRAGMA index_info("${index.name}")`).all() as Array<{ name: string }>).map((row) => row.name);
      shape.indexes.push(`${table}(${columns.join(", ")})${index.unique ? " unique" : ""}`);
    }
    for (const key of client.query(`PRAGMA foreign_key_list("${table}")`).all() as Array<{ table: string; from: string; to: string; on_delete: string }>) {
      shape.foreignKeys.push(`${table}(${key.from}) → ${key.table}(${key.to}) on delete ${key.on_delete.toLowerCase()}`);
    }
  }
  closeDatabase(db);
  rmSync(dir, { recursive: true, force: true });
  shape.indexes.sort();
  shape.foreignKeys.sort();
  return shape;
}

async function postgresShape(url: string): Promise<Shape> {
  const sql = testSql(url);
  try {
    const shape: Shape = { columns: {}, primaryKeys: {}, indexes: [], foreignKeys: [] };
    for (const row of await sql`SELECT table_name, column_name, is_nullable FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, column_name`) {
      (shape.columns[row.table_name] ??= []).push(`${row.column_name} ${row.is_nullable === "YES" ? "NULL" : "NOT NULL"}`);
    }
    for (const columns of Object.values(shape.columns)) columns.sort();
    for (const row of await sql`
      SELECT t.relname AS table, i.indisprimary AS primary, i.indisunique AS unique,
        array(SELECT a.attname FROM unnest(i.indkey) WITH ORDINALITY k(attnum, n) JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum ORDER BY k.n)::text[] AS columns
      FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace s ON s.oid = t.relnamespace
      WHERE s.nspname = 'public'`) {
      if (row.primary) shape.primaryKeys[row.table] = row.columns;
      else shape.indexes.push(`${row.table}(${row.columns.join(", ")})${row.unique ? " unique" : ""}`);
    }
    for (const row of await sql`
      SELECT c.conrelid::regclass::text AS table, a.attname AS from, c.confrelid::regclass::text AS to_table, af.attname AS to,
        CASE c.confdeltype WHEN 'c' THEN 'cascade' WHEN 'a' THEN 'no action' WHEN 'r' THEN 'restrict' WHEN 'n' THEN 'set null' ELSE 'set default' END AS on_delete
      FROM pg_constraint c
      JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
      JOIN pg_attribute af ON af.attrelid = c.confrelid AND af.attnum = c.confkey[1]
      WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace`) {
      shape.foreignKeys.push(`${row.table}(${row.from}) → ${row.to_table}(${row.to}) on delete ${row.on_delete}`);
    }
    shape.indexes.sort();
    shape.foreignKeys.sort();
    return shape;
  } finally {
    await sql.end();
  }
}

if (requirePostgres("the schema parity test")) {
  const drops: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const drop of drops) await drop();
  });

  test("SQLite's and PostgreSQL's migrations build the same tables, columns, nullability, keys and indexes", async () => {
    const database = await freshPostgresDatabase();
    drops.push(database.drop);
    const sqlite = sqliteShape();
    const pg = await postgresShape(database.url);
    // PostgreSQL's own tables: failed authentications counted across instances (on SQLite one process counts
    // them in memory), and the heartbeats of the instances (one process serves a SQLite file).
    expect(pg.columns.auth_failures).toEqual(["client NOT NULL", "failed_at NOT NULL"]);
    expect(pg.columns.instances).toEqual(["heartbeat_at NOT NULL", "id NOT NULL"]);
    delete pg.columns.auth_failures;
    delete pg.columns.instances;
    pg.indexes = pg.indexes.filter((index) => !index.startsWith("auth_failures("));
    delete pg.primaryKeys.instances;
    // The purge of tombstones: by deletion time on PostgreSQL, whose positions (a sequence) are not commit order; by
    // position on SQLite, whose positions follow deletion time (one writer), so without that index.
    expect(pg.indexes).toContain("tombstones(deleted_at)");
    pg.indexes = pg.indexes.filter((index) => index !== "tombstones(deleted_at)");
    // Tombstones are keyed by their record on SQLite (WITHOUT ROWID: two b-trees a tombstone, not three), by their
    // position (an identity) with a unique index on the record on PostgreSQL: the same columns, one key each way.
    expect(sqlite.primaryKeys.tombstones).toEqual(["environment_id", "resource", "id"]);
    expect(pg.primaryKeys.tombstones).toEqual(["position"]);
    expect(pg.indexes).toContain("tombstones(environment_id, resource, id) unique");
    sqlite.primaryKeys.tombstones = ["position"];
    pg.indexes = pg.indexes.filter((index) => index !== "tombstones(environment_id, resource, id) unique");
    expect(Object.keys(sqlite.columns).length).toBeGreaterThanOrEqual(11);
    expect(pg.columns).toEqual(sqlite.columns);
    expect(pg.primaryKeys).toEqual(sqlite.primaryKeys);
    // SQLite writes a UNIQUE column constraint as an automatic index; PostgreSQL as a unique index too.
    expect(pg.indexes).toEqual(sqlite.indexes);
    expect(pg.foreignKeys).toEqual(sqlite.foreignKeys);
  });
}
