import { describe, expect, test } from "bun:test";
import { createTestDatabase, postgresServer, requirePostgres } from "./postgres";
import { testSql } from "./sql";

// The PostgreSQL harness the backend's tests stand on: one real server per test process, a fresh database per test.
describe.skipIf(!requirePostgres("the PostgreSQL test harness"))("a real PostgreSQL server for the tests", () => {
  test("is PostgreSQL 15 or later (the oldest version importd supports), on loopback", async () => {
    const server = await postgresServer();
    const rows = await server.admin((sql) => sql<{ version: number }>`select current_setting('server_version_num')::int as version`);
    expect(rows[0]!.version).toBeGreaterThanOrEqual(150000);
  });

  test("gives each test a fresh database: what one writes, the next does not see", async () => {
    const first = await createTestDatabase();
    const second = await createTestDatabase();
    expect(first.name).not.toBe(second.name);
    const a = testSql(first.url);
    const b = testSql(second.url);
    try {
      await a`create table marks (id int primary key)`;
      await a`insert into marks values (1)`;
      const rows = await b<{ tables: number }>`select count(*)::int as tables from pg_tables where schemaname = 'public'`;
      expect(rows[0]!.tables).toBe(0);
    } finally {
      await Promise.all([a.end(), b.end()]);
      await Promise.all([first.drop(), second.drop()]);
    }
  });

  test("copies a template database, so that a migrated schema is made once and copied per test", async () => {
    const template = await createTestDatabase();
    const setup = testSql(template.url);
    await setup`create table marks (id int primary key)`;
    await setup.end();
    const copy = await createTestDatabase(template.name);
    const sql = testSql(copy.url);
    try {
      const rows = await sql<{ count: number }>`select count(*)::int as count from marks`;
      expect(rows[0]!.count).toBe(0);
    } finally {
      await sql.end();
      await copy.drop();
      await template.drop();
    }
  });
});
