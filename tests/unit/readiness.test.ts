import { afterAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { closeDatabase, migrate, openDatabase } from "../../src/db/client";
import { checkReadiness } from "../../src/observability/readiness";
import type { WorkerPool } from "../../src/worker/pool";
import { tempDir } from "../helpers/server";

const dirs: string[] = [];
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

function database(migrated: boolean) {
  const dir = tempDir();
  dirs.push(dir);
  const db = openDatabase(dir);
  if (migrated) migrate(db);
  else db.$client.exec("CREATE TABLE __drizzle_migrations (id INTEGER PRIMARY KEY, hash TEXT, created_at NUMERIC)");
  return db;
}
const pool = (readyWorkers: number, size = 2) => ({ readyWorkers, size }) as unknown as WorkerPool;

describe("checkReadiness", () => {
  test("ready when the database answers, is migrated, every worker is up and the server is not stopping", () => {
    expect(checkReadiness(database(true), pool(2), () => false)).toEqual({
      ready: true,
      checks: { database: true, migrations: true, workers: true, accepting: true },
    });
  });

  test("not ready, and says why, for each failed check", () => {
    expect(checkReadiness(database(false), pool(2), () => false)).toMatchObject({ ready: false, checks: { migrations: false }, detail: "the database has migrations left to apply" });
    expect(checkReadiness(database(true), pool(1), () => false)).toMatchObject({ ready: false, checks: { workers: false }, detail: "1 of 2 worker threads are up" });
    expect(checkReadiness(database(true), pool(2), () => true)).toMatchObject({ ready: false, checks: { accepting: false }, detail: "the server is shutting down" });
    const closed = database(true);
    closeDatabase(closed);
    const report = checkReadiness(closed, pool(2), () => false);
    expect(report).toMatchObject({ ready: false, checks: { database: false, migrations: false } });
    expect(report.detail).toStartWith("the database cannot be read:");
  });
});
