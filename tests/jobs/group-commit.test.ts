import { afterEach, describe, expect, test } from "bun:test";
import { count, eq } from "drizzle-orm";
import { groupLimits } from "../../src/jobs/apply";
import { acceptBatches, type IntakeRequest } from "../../src/jobs/intake";
import { resourceByPath } from "../../src/resources/registry";
import type { Db } from "../../src/store/sqlite/database";
import { assets as assetsTable, jobPayloads, jobs as jobsTable, subAreas as subAreasTable } from "../../src/store/sqlite/schema";
import type { SqliteStore } from "../../src/store/sqlite/store";
import { asset, assetCategories, assetTypes, assets, subAreas } from "../helpers/records";
import { runEnvironment, sqliteStoreWith } from "../helpers/store";

let store: SqliteStore | undefined;
afterEach(async () => {
  await store?.close();
  store = undefined;
});

const bytes = (value: unknown) => new TextEncoder().encode(typeof value === "string" ? value : JSON.stringify(value));
const request = (environmentId: number, path: string, records: unknown, idempotencyKey?: string): IntakeRequest => ({
  environmentId,
  resource: resourceByPath(path)!,
  body: bytes(records),
  idempotencyKey,
});

/** An empty database with two environments (ids 1 and 2); reference data in the first unless asked not to. */
async function setUp(options: { referenceData?: boolean } = {}) {
  store = await sqliteStoreWith("one", "two");
  const jobs = store.queue;
  if (options.referenceData ?? true) {
    await acceptBatches(jobs, [request(1, "subareas", subAreas), request(1, "assettypes", assetTypes), request(1, "assetcategories", assetCategories)]);
    await runEnvironment(jobs, 1);
  }
  return { db: store.db, jobs };
}

const jobId = (answer: { result: unknown }) => (answer.result as { job: { id: number } }).job.id;
const status = (db: Db, id: number) => db.select().from(jobsTable).where(eq(jobsTable.id, id)).get()!;

describe("intakes stored together", () => {
  test("each request gets its own answer: stored, refused with its own errors, replayed or in conflict, even within one call", async () => {
    const { db, jobs } = await setUp({ referenceData: false });
    const answers = await acceptBatches(jobs, [
      request(1, "assets", [asset(1)]),
      request(1, "assets", "[{]"),
      request(1, "assets", [asset(2)], "key-a"),
      request(1, "assets", [asset(2)], "key-a"),
      request(1, "assets", [asset(3)], "key-a"),
      request(2, "subareas", subAreas),
    ]);
    expect(answers.map(({ result }) => (result.ok ? (result.replayed ? "replayed" : "stored") : "idempotencyConflict" in result ? "conflict" : "invalid"))).toEqual([
      "stored", "invalid", "stored", "replayed", "conflict", "stored",
    ]);
    expect(jobId(answers[3]!)).toBe(jobId(answers[2]!));
    expect(answers[1]!.result).toMatchObject({ ok: false, errors: { $: [expect.stringContaining("not valid JSON")] } });
    // The batch each new job was read as, for the thread that applies it; none for a replay.
    expect(answers.map((answer) => answer.batch?.records.length)).toEqual([1, undefined, 1, undefined, undefined, 2]);
    expect(db.select({ n: count() }).from(jobsTable).get()!.n).toBe(3);
    expect(db.select({ n: count() }).from(jobPayloads).get()!.n).toBe(3);
    expect(status(db, jobId(answers[5]!)).environmentId).toBe(2);
  });

  test("they are one transaction: when one cannot be stored, none is, and all are told", async () => {
    const { db, jobs } = await setUp({ referenceData: false });
    // Environment 99 does not exist: its job breaks a foreign key, after the others were inserted.
    await expect(acceptBatches(jobs, [request(1, "assets", [asset(1)]), request(99, "assets", [asset(2)]), request(1, "assets", [asset(3)])])).rejects.toThrow();
    expect(db.select({ n: count() }).from(jobsTable).get()!.n).toBe(0);
    expect(db.select({ n: count() }).from(jobPayloads).get()!.n).toBe(0);
  });
});

describe("small jobs applied together", () => {
  test("the jobs queued after a small one are applied with it, in order, each with its own outcome", async () => {
    const { db, jobs } = await setUp({ referenceData: false });
    const ids = (await acceptBatches(jobs, [
      request(1, "assettypes", assetTypes),
      request(1, "assetcategories", assetCategories),
      request(1, "subareas", subAreas),
      // Refers to the sub areas of the job just before, applied in the same transaction.
      request(1, "assets", [asset(1, { name: "first" })]),
      request(1, "assets", [asset(2, { subAreaId: "atlantis" })]),
      request(1, "assets", [asset(3), asset(3)]),
      request(1, "assets", [asset(1, { name: "second" }), asset(4, { subAreaId: "atlantis" })]),
      request(2, "subareas", subAreas),
    ])).map(jobId);
    const finished = await runEnvironment(jobs, 1);
    expect(finished.map(({ id, status, applied, rejected }): unknown[] => [id, status, applied, rejected])).toEqual([
      [ids[0], "Succeeded", 2, 0],
      [ids[1], "Succeeded", 1, 0],
      [ids[2], "Succeeded", 2, 0],
      [ids[3], "Succeeded", 1, 0],
      [ids[4], "Failed", 0, 1],
      [ids[5], "Failed", 0, 2],
      [ids[6], "PartiallySucceeded", 1, 1],
    ]);
    for (const id of ids.slice(0, 7)) {
      const job = status(db, id);
      expect(job.startedAt).not.toBeNull();
      expect(job.completedAt! >= job.startedAt!).toBe(true);
      expect(JSON.parse(job.output!).total).toBe(job.recordCount);
    }
    expect(JSON.parse(status(db, ids[5]!).output!).message).toContain("more than once");
    // The later job's upsert won; the other environment's job was left for its own run.
    expect(db.select().from(assetsTable).where(eq(assetsTable.id, asset(1).id)).get()).toMatchObject({ name: "second", lastJobId: ids[6] });
    expect(status(db, ids[7]!).status).toBe("Pending");
    expect(db.select({ n: count() }).from(subAreasTable).where(eq(subAreasTable.environmentId, 2)).get()!.n).toBe(0);
    expect(db.select({ n: count() }).from(jobPayloads).get()!.n).toBe(1);
  });

  test("within one run, each job's references are checked against the records as the jobs before it left them", async () => {
    const { db, jobs } = await setUp();
    const atlantis = { id: "atlantis", name: "Atlantis" };
    const ids = (await acceptBatches(jobs, [
      request(1, "assets", [asset(1, { subAreaId: "atlantis" })]),
      request(1, "assets", [asset(2, { subAreaId: "atlantis" }), asset(3)]),
      request(1, "subareas", [atlantis]),
      request(1, "assets", [asset(4, { subAreaId: "atlantis" }), asset(5)]),
    ])).map(jobId);
    const finished = await runEnvironment(jobs, 1);
    expect(finished.map(({ id, status, applied, rejected }): unknown[] => [id, status, applied, rejected])).toEqual([
      [ids[0], "Failed", 0, 1],
      [ids[1], "PartiallySucceeded", 1, 1],
      [ids[2], "Succeeded", 1, 0],
      [ids[3], "Succeeded", 2, 0],
    ]);
    expect(db.select().from(assetsTable).where(eq(assetsTable.id, asset(4).id)).get()).toMatchObject({ subAreaId: "atlantis", lastJobId: ids[3] });
  });

  test("alone, only the job asked for is applied", async () => {
    const { db, jobs } = await setUp();
    const ids = (await acceptBatches(jobs, [request(1, "assets", [asset(1)]), request(1, "assets", [asset(2)])])).map(jobId);
    expect((await runEnvironment(jobs, 1, { singleJob: true })).map((job) => job.id)).toEqual([ids[0]!]);
    expect(status(db, ids[1]!).status).toBe("Pending");
  });

  test(`a group stops before ${groupLimits.maxRecords} records or ${groupLimits.maxJobs} jobs; a bigger job is applied alone`, async () => {
    const { db, jobs } = await setUp();
    const big = (await acceptBatches(jobs, [request(1, "assets", assets(groupLimits.maxRecords + 1)), request(1, "assets", [asset(1)])])).map(jobId);
    expect((await runEnvironment(jobs, 1)).map((job) => job.id)).toEqual([big[0]!]);
    await runEnvironment(jobs, 1);

    const half = Math.floor(groupLimits.maxRecords / 2);
    const sized = (await acceptBatches(jobs, [request(1, "assets", assets(half)), request(1, "assets", assets(half, 100_000)), request(1, "assets", [asset(1)])])).map(jobId);
    expect((await runEnvironment(jobs, 1)).map((job) => job.id)).toEqual(sized.slice(0, 2));
    await runEnvironment(jobs, 1);

    const many = (await acceptBatches(jobs, Array.from({ length: groupLimits.maxJobs + 5 }, (_, i) => request(1, "assets", [asset(i)])))).map(jobId);
    expect(await runEnvironment(jobs, 1)).toHaveLength(groupLimits.maxJobs);
    expect(await runEnvironment(jobs, 1)).toHaveLength(5);
  });
});

test("the queue: the oldest pending job of each environment, oldest first; an environment with a run in progress has none to start", async () => {
  const { jobs } = await setUp({ referenceData: false });
  const heads = async () => (await jobs.heads()).map(({ environmentId, jobId }) => ({ environmentId, jobId }));
  expect(await heads()).toEqual([]);
  const ids = (await acceptBatches(jobs, [request(2, "subareas", subAreas), request(1, "subareas", subAreas), request(2, "subareas", subAreas)])).map(jobId);
  expect(await heads()).toEqual([{ environmentId: 2, jobId: ids[0]! }, { environmentId: 1, jobId: ids[1]! }]);
  const run = await jobs.claimRun({ token: "t", environmentId: 2, alone: true }, groupLimits);
  expect(run!.jobs.map((job) => job.id)).toEqual([ids[0]!]);
  expect(await heads()).toEqual([{ environmentId: 1, jobId: ids[1]! }]);
  expect(await jobs.claimRun({ token: "u", environmentId: 2 }, groupLimits)).toBeUndefined();
});
