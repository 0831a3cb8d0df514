import { afterEach, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { AccessRepository } from "../../src/access/repository";
import { closeDatabase, migrate, openDatabase, type Db } from "../../src/db/client";
import { assets as assetsTable, jobPayloads } from "../../src/db/schema";
import { applyJobs } from "../../src/jobs/apply";
import { acceptBatch } from "../../src/jobs/intake";
import { requestBody, storedPayload } from "../../src/jobs/payload";
import { JobRepository } from "../../src/jobs/repository";
import { resourceByPath } from "../../src/resources/registry";
import { assetCategories, assets, assetTypes, subAreas } from "../helpers/records";
import { tempDir } from "../helpers/server";

const bytes = (value: unknown) => new TextEncoder().encode(typeof value === "string" ? value : JSON.stringify(value));
const zstdMagic = [0x28, 0xb5, 0x2f, 0xfd];

describe("stored payloads", () => {
  test("a big body is stored compressed (several times smaller) and reads back byte for byte", () => {
    const body = bytes(assets(500));
    expect(body.byteLength).toBeGreaterThan(64 * 1024);
    const stored = storedPayload(body);
    expect([...stored.subarray(0, 4)]).toEqual(zstdMagic);
    expect(stored.byteLength).toBeLessThan(body.byteLength / 4);
    expect(requestBody(stored)).toEqual(body);
  });

  test("a small body is stored as it came", () => {
    const body = bytes(assets(2));
    expect(storedPayload(body)).toBe(body);
    expect(requestBody(body)).toBe(body);
  });

  test("an uncompressed payload (as an earlier importd stored every body) reads back as it is, whatever JSON it starts with", () => {
    for (const text of [JSON.stringify(assets(300)), `  \n${JSON.stringify(assets(1))}`, `\uFEFF${JSON.stringify(assets(1))}`]) {
      const body = bytes(text);
      expect(requestBody(body)).toBe(body);
    }
  });
});

let db: Db | undefined;
afterEach(() => {
  if (db) closeDatabase(db);
  db = undefined;
});

test("a big job applied from its stored payload (another thread, a restart) gets every record", () => {
  db = openDatabase(tempDir());
  migrate(db);
  new AccessRepository(db).createEnvironment("payloads");
  const jobs = new JobRepository(db);
  for (const [path, records] of [["subareas", subAreas], ["assettypes", assetTypes], ["assetcategories", assetCategories]] as const) {
    const { result } = acceptBatch(jobs, 1, resourceByPath(path)!, bytes(records));
    applyJobs(db, jobs, (result as { job: { id: number } }).job.id);
  }
  const body = bytes(assets(2_000));
  const { result } = acceptBatch(jobs, 1, resourceByPath("assets")!, body);
  const jobId = (result as { job: { id: number } }).job.id;
  const stored = db.select({ body: jobPayloads.body }).from(jobPayloads).where(eq(jobPayloads.jobId, jobId)).get()!.body as Uint8Array;
  expect(stored.byteLength).toBeLessThan(body.byteLength / 4);
  // No batch handed over: the job is read from what was stored.
  expect(applyJobs(db, jobs, jobId)).toEqual([expect.objectContaining({ id: jobId, status: "Succeeded", applied: 2_000 })]);
  expect(db.select().from(assetsTable).all()).toHaveLength(2_000);
});
