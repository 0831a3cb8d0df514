import { afterEach, expect, test } from "bun:test";
import { getTableName } from "drizzle-orm";
import { queueHeadsSql } from "../../src/store/sqlite/jobs";
import { existingIdsSql } from "../../src/store/sqlite/records";
import { recordTables } from "../../src/store/sqlite/schema";
import type { SqliteStore } from "../../src/store/sqlite/store";
import { sqliteStoreWith } from "../helpers/store";

// The scheduler asks for the queue heads on the HTTP thread after every run, among retained finished jobs that
// only grow with the retention. With a plain JOIN, SQLite scanned every job for it (3.6 ms with 6,400 jobs).
// A run looks up the ids its batches refer to, in reference tables of any size.

let store: SqliteStore | undefined;
afterEach(async () => {
  await store?.close();
  store = undefined;
});

/** Jobs written straight into the table: `finished` Succeeded ones in environment 1, then the given ones. */
function seedJobs(db: SqliteStore["db"], finished: number, others: Array<{ environmentId: number; status: string }>) {
  const insert = db.$client.prepare(
    "INSERT INTO jobs (environment_id, type, status, record_count, created_at, sequence) VALUES (?1, 'Asset', ?2, 1, '2026-11-24T00:00:00.000Z', ?3)",
  );
  const sequences = new Map<number, number>();
  const add = (environmentId: number, status: string) => {
    const sequence = (sequences.get(environmentId) ?? 0) + 1;
    sequences.set(environmentId, sequence);
    return Number(insert.run(environmentId, status, sequence).lastInsertRowid);
  };
  db.$client.transaction(() => {
    for (let i = 0; i < finished; i++) add(1, "Succeeded");
  })();
  const ids = others.map(({ environmentId, status }) => add(environmentId, status));
  // A statement left open would keep the store's closing checkpoint from running.
  insert.finalize();
  return ids;
}

test("the queue heads are found through indexes, never by scanning the jobs table, whatever the statistics say", async () => {
  store = await sqliteStoreWith("one", "two", "three");
  const [twoFirst] = seedJobs(store.db, 5_000, [
    { environmentId: 2, status: "Pending" },
    { environmentId: 2, status: "Pending" },
    { environmentId: 3, status: "Processing" },
    { environmentId: 3, status: "Pending" },
  ]);
  for (const analyzed of [false, true]) {
    if (analyzed) store.db.$client.exec("ANALYZE");
    const explain = store.db.$client.prepare<{ detail: string }, [string, string]>(`EXPLAIN QUERY PLAN ${queueHeadsSql}`);
    const plan = explain.all("Pending", "Processing");
    explain.finalize();
    const steps = plan.map((step) => step.detail);
    // Environments may be scanned (there are a few); the jobs table (aliases j, p, r) only searched by index.
    expect(steps.filter((step) => /^SCAN (j|p|r)\b/.test(step))).toEqual([]);
    expect(steps.some((step) => /^SEARCH j USING INDEX jobs_environment_sequence_idx/.test(step))).toBe(true);
  }
  // Environment 1 has only finished jobs, 3 a run in progress: only 2's oldest pending job is a head.
  expect(await store.queue.heads()).toEqual([{ environmentId: 2, jobId: twoFirst!, attempts: 0 }]);
});

test("a run's reference check seeks each id it asks about by the table's primary key, in every record table", async () => {
  store = await sqliteStoreWith("one");
  for (const table of Object.values(recordTables).map((table) => getTableName(table))) {
    const explain = store.db.$client.prepare<{ detail: string }, [number, string]>(`EXPLAIN QUERY PLAN ${existingIdsSql(table)}`);
    const steps = explain.all(1, JSON.stringify(["a", "b"])).map((step) => step.detail);
    explain.finalize();
    expect({ table, scans: steps.filter((step) => step.startsWith(`SCAN ${table}`)) }).toEqual({ table, scans: [] });
    expect(steps.some((step) => step.startsWith(`SEARCH ${table} USING`) && step.includes("environment_id=? AND id=?"))).toBe(true);
  }
});
