import { afterEach, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { AccessRepository } from "../../src/access/repository";
import { checkpointPassively, closeDatabase, migrate, openDatabase, type Db } from "../../src/db/client";
import { assets as assetsTable, jobPayloads } from "../../src/db/schema";
import { applyJobs } from "../../src/jobs/apply";
import type { Records } from "../../src/jobs/batch";
import { acceptBatch } from "../../src/jobs/intake";
import { JobRepository } from "../../src/jobs/repository";
import { resourceByPath } from "../../src/resources/registry";
import { assets, assetCategories, assetTypes, subAreas } from "../helpers/records";
import { tempDir } from "../helpers/server";

let db: Db | undefined;
afterEach(() => {
  if (db) closeDatabase(db);
  db = undefined;
});

// Applies the one job, with the batch this "thread" kept parsed if given.
const applyJob = (db: Db, jobId: number, parsed?: Records) => applyJobs(db, new JobRepository(db), jobId, { parsed: (id) => (id === jobId ? parsed : undefined), alone: true })[0];

const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

function seeded(): { db: Db; environmentId: number } {
  db = openDatabase(tempDir());
  migrate(db);
  new AccessRepository(db).createEnvironment("parse-once");
  const environmentId = 1;
  for (const [path, records] of [["subareas", subAreas], ["assettypes", assetTypes], ["assetcategories", assetCategories]] as const) {
    const { result, records: parsed } = acceptBatch(new JobRepository(db), environmentId, resourceByPath(path)!, bytes(records));
    if (!result.ok) throw new Error("seed refused");
    applyJob(db, (result as { job: { id: number } }).job.id, parsed);
  }
  return { db, environmentId };
}

test("intake hands back the batch it validated, and applying with it never reads the stored payload again", () => {
  const { db, environmentId } = seeded();
  const { result, records } = acceptBatch(new JobRepository(db), environmentId, resourceByPath("assets")!, bytes(assets(3)));
  expect(result.ok).toBe(true);
  expect(records).toHaveLength(3);
  const jobId = (result as { job: { id: number } }).job.id;
  // Without its payload, the job could only succeed from the records handed over.
  db.delete(jobPayloads).where(eq(jobPayloads.jobId, jobId)).run();
  expect(applyJob(db, jobId, records)).toMatchObject({ status: "Succeeded", applied: 3 });
  expect(db.select().from(assetsTable).all()).toHaveLength(3);
});

test("without the handed-over batch (another thread, a restart) the job is read from its payload, as before", () => {
  const { db, environmentId } = seeded();
  const kept = acceptBatch(new JobRepository(db), environmentId, resourceByPath("assets")!, bytes(assets(2)));
  expect(applyJob(db, (kept.result as { job: { id: number } }).job.id)).toMatchObject({ status: "Succeeded", applied: 2 });
  const lost = acceptBatch(new JobRepository(db), environmentId, resourceByPath("assets")!, bytes(assets(2, 10)));
  const lostId = (lost.result as { job: { id: number } }).job.id;
  db.delete(jobPayloads).where(eq(jobPayloads.jobId, lostId)).run();
  expect(applyJob(db, lostId)).toMatchObject({ status: "Failed", applied: 0 });
});

test("a replayed Idempotency-Key hands back no batch: there is no new job to apply", () => {
  const { db, environmentId } = seeded();
  const first = acceptBatch(new JobRepository(db), environmentId, resourceByPath("assets")!, bytes(assets(1)), "key-1");
  const again = acceptBatch(new JobRepository(db), environmentId, resourceByPath("assets")!, bytes(assets(1)), "key-1");
  expect(first.records).toHaveLength(1);
  expect(again.result).toMatchObject({ ok: true, replayed: true });
  expect(again.records).toBeUndefined();
});

test("commits never checkpoint the WAL themselves; a passive checkpoint folds it into the database file", () => {
  const { db, environmentId } = seeded();
  expect(db.$client.query("PRAGMA wal_autocheckpoint").get()).toEqual({ wal_autocheckpoint: 0 });
  const { result, records } = acceptBatch(new JobRepository(db), environmentId, resourceByPath("assets")!, bytes(assets(15_000)));
  applyJob(db, (result as { job: { id: number } }).job.id, records);
  const checkpoint = checkpointPassively(db);
  // 15,000 assets applied are more than the 1,000 pages at which a commit would have checkpointed by default.
  expect(checkpoint.walFrames).toBeGreaterThan(1_000);
  expect(checkpoint.checkpointedFrames).toBe(checkpoint.walFrames);
});
