import { afterEach, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import type { ValidBatch } from "../../src/jobs/batch";
import { acceptBatch } from "../../src/jobs/intake";
import { resourceByPath } from "../../src/resources/registry";
import { checkpointPassively, type Db } from "../../src/store/sqlite/database";
import { assets as assetsTable, jobPayloads, jobRejections } from "../../src/store/sqlite/schema";
import type { SqliteStore } from "../../src/store/sqlite/store";
import { asset, assets, assetCategories, assetTypes, subAreas } from "../helpers/records";
import { runEnvironment, sqliteStoreWith } from "../helpers/store";

let store: SqliteStore | undefined;
afterEach(async () => {
  await store?.close();
  store = undefined;
});

// Applies the one job (its environment's oldest pending), with the batch this "thread" kept parsed if given.
const applyJob = async (_db: Db, jobId: number, parsed?: ValidBatch) =>
  (await runEnvironment(store!.queue, 1, { parsed: (id) => (id === jobId ? parsed : undefined), singleJob: true }))[0];

const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

async function seeded(): Promise<{ db: Db; environmentId: number }> {
  store = await sqliteStoreWith("parse-once");
  const environmentId = 1;
  for (const [path, records] of [["subareas", subAreas], ["assettypes", assetTypes], ["assetcategories", assetCategories]] as const) {
    const { result, batch: parsed } = await acceptBatch(store.queue, environmentId, resourceByPath(path)!, bytes(records));
    if (!result.ok) throw new Error("seed refused");
    await applyJob(store.db, (result as { job: { id: number } }).job.id, parsed);
  }
  return { db: store.db, environmentId };
}

test("intake hands back the batch it validated, and applying with it never reads the stored payload again", async () => {
  const { db, environmentId } = await seeded();
  const { result, batch } = await acceptBatch(store!.queue, environmentId, resourceByPath("assets")!, bytes(assets(3)));
  expect(result.ok).toBe(true);
  expect(batch?.records).toHaveLength(3);
  const jobId = (result as { job: { id: number } }).job.id;
  // Without its payload, the job could only succeed from the records handed over.
  db.delete(jobPayloads).where(eq(jobPayloads.jobId, jobId)).run();
  expect(await applyJob(db, jobId, batch)).toMatchObject({ status: "Succeeded", applied: 3 });
  expect(db.select().from(assetsTable).all()).toHaveLength(3);
});

test("without the handed-over batch (another thread, a restart) the job is read from its payload, as before", async () => {
  const { db, environmentId } = await seeded();
  const kept = await acceptBatch(store!.queue, environmentId, resourceByPath("assets")!, bytes(assets(2)));
  expect(await applyJob(db, (kept.result as { job: { id: number } }).job.id)).toMatchObject({ status: "Succeeded", applied: 2 });
  const lost = await acceptBatch(store!.queue, environmentId, resourceByPath("assets")!, bytes(assets(2, 10)));
  const lostId = (lost.result as { job: { id: number } }).job.id;
  db.delete(jobPayloads).where(eq(jobPayloads.jobId, lostId)).run();
  expect(await applyJob(db, lostId)).toMatchObject({ status: "Failed", applied: 0 });
});

test("a rejected record is stored as sent whether the batch was handed over or read from its payload", async () => {
  const { db, environmentId } = await seeded();
  const sent = [asset(1, { subAreaId: "nowhere", colour: "red", description: null })];
  for (const handedOver of [true, false]) {
    const { result, batch } = await acceptBatch(store!.queue, environmentId, resourceByPath("assets")!, bytes(sent));
    const jobId = (result as { job: { id: number } }).job.id;
    expect(await applyJob(db, jobId, handedOver ? batch : undefined)).toMatchObject({ status: "Failed", rejected: 1 });
    const rows = db.select({ record: jobRejections.record }).from(jobRejections).where(eq(jobRejections.jobId, jobId)).all();
    expect(rows).toEqual([{ record: JSON.stringify(sent[0]) }]);
  }
});

test("a replayed Idempotency-Key hands back no batch: there is no new job to apply", async () => {
  const { db, environmentId } = await seeded();
  const first = await acceptBatch(store!.queue, environmentId, resourceByPath("assets")!, bytes(assets(1)), "key-1");
  const again = await acceptBatch(store!.queue, environmentId, resourceByPath("assets")!, bytes(assets(1)), "key-1");
  expect(first.batch?.records).toHaveLength(1);
  expect(again.result).toMatchObject({ ok: true, replayed: true });
  expect(again.batch).toBeUndefined();
});

test("commits never checkpoint the WAL themselves; a passive checkpoint folds it into the database file", async () => {
  const { db, environmentId } = await seeded();
  expect(db.$client.query("PRAGMA wal_autocheckpoint").get()).toEqual({ wal_autocheckpoint: 0 });
  const { result, batch } = await acceptBatch(store!.queue, environmentId, resourceByPath("assets")!, bytes(assets(15_000)));
  await applyJob(db, (result as { job: { id: number } }).job.id, batch);
  const checkpoint = checkpointPassively(db);
  // 15,000 assets applied are more than the 1,000 pages at which a commit would have checkpointed by default.
  expect(checkpoint.walFrames).toBeGreaterThan(1_000);
  expect(checkpoint.checkpointedFrames).toBe(checkpoint.walFrames);
});
