import { afterAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { checkReadiness } from "../../src/observability/readiness";
import { SqliteStore } from "../../src/store/sqlite/store";
import type { WorkerPool } from "../../src/worker/pool";
import { outboxRows } from "../../src/webhooks/outbox";
import { tempDir } from "../helpers/server";

const dirs: string[] = [];
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

function database(migrated: boolean) {
  const dir = tempDir();
  dirs.push(dir);
  const store = SqliteStore.open(dir, { outbox: outboxRows });
  // As if the last migrations had not been applied yet.
  if (!migrated) store.db.$client.exec("DELETE FROM __drizzle_migrations WHERE rowid > (SELECT min(rowid) FROM __drizzle_migrations)");
  return store;
}
const pool = (readyWorkers: number, size = 2) => ({ readyWorkers, size }) as unknown as WorkerPool;

describe("checkReadiness", () => {
  test("ready when the database answers, is migrated, every worker is up and the server is not stopping", async () => {
    expect(await checkReadiness(database(true), pool(2), () => false)).toEqual({
      ready: true,
      checks: { database: true, migrations: true, workers: true, accepting: true },
    });
  });

  test("not ready, and says why, for each failed check", async () => {
    expect(await checkReadiness(database(false), pool(2), () => false)).toMatchObject({ ready: false, checks: { migrations: false }, detail: "the database has migrations left to apply" });
    expect(await checkReadiness(database(true), pool(1), () => false)).toMatchObject({ ready: false, checks: { workers: false }, detail: "1 of 2 worker threads are up" });
    expect(await checkReadiness(database(true), pool(2), () => true)).toMatchObject({ ready: false, checks: { accepting: false }, detail: "the server is shutting down" });
    const closed = database(true);
    await closed.close();
    const report = await checkReadiness(closed, pool(2), () => false);
    expect(report).toMatchObject({ ready: false, checks: { database: false, migrations: false } });
    expect(report.detail).toStartWith("the database cannot be read:");
  });
});
