import { afterEach, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { acceptBatch } from "../../src/jobs/intake";
import { requestBody, storedPayload } from "../../src/jobs/payload";
import { resourceByPath } from "../../src/resources/registry";
import { assets as assetsTable, jobPayloads } from "../../src/store/sqlite/schema";
import type { SqliteStore } from "../../src/store/sqlite/store";
import { assetCategories, assets, assetTypes, subAreas } from "../helpers/records";
import { runEnvironment, sqliteStoreWith } from "../helpers/store";

const bytes = (value: unknown) => new TextEncoder().encode(typeof value === "string" ? value : JSON.stringify(value));
const zstdMagic = [0x28, 0xb5, 0x2f, 0xfd];

describe("stored payloads", () => {
  test("a big body is stored compressed (several times smaller) and reads back byte for byte", async () => {
    const body = bytes(assets(500));
    expect(body.byteLength).toBeGreaterThan(64 * 1024);
    const stored = await storedPayload(body);
    expect([...stored.subarray(0, 4)]).toEqual(zstdMagic);
    expect(stored.byteLength).toBeLessThan(body.byteLength / 4);
    expect(requestBody(stored)).toEqual(body);
  });

  test("a small body is stored as it came", async () => {
    const body = bytes(assets(2));
    expect(await storedPayload(body)).toBe(body);
    expect(requestBody(body)).toBe(body);
  });

  test("an uncompressed payload (as an earlier importd stored every body) reads back as it is, whatever JSON it starts with", () => {
    for (const text of [JSON.stringify(assets(300)), `  \n${JSON.stringify(assets(1))}`, `\uFEFF${JSON.stringify(assets(1))}`]) {
      const body = bytes(text);
      expect(requestBody(body)).toBe(body);
    }
  });
});

let store: SqliteStore | undefined;
afterEach(async () => {
  await store?.close();
  store = undefined;
});

test("a big job applied from its stored payload (another thread, a restart) gets every record", async () => {
  store = await sqliteStoreWith("payloads");
  const { db, queue: jobs } = store;
  for (const [path, records] of [["subareas", subAreas], ["assettypes", assetTypes], ["assetcategories", assetCategories]] as const) {
    await acceptBatch(jobs, 1, resourceByPath(path)!, bytes(records));
    await runEnvironment(jobs, 1);
  }
  const body = bytes(assets(2_000));
  const { result } = await acceptBatch(jobs, 1, resourceByPath("assets")!, body);
  const jobId = (result as { job: { id: number } }).job.id;
  const stored = db.select({ body: jobPayloads.body }).from(jobPayloads).where(eq(jobPayloads.jobId, jobId)).get()!.body as Uint8Array;
  expect(stored.byteLength).toBeLessThan(body.byteLength / 4);
  // No batch handed over: the job is read from what was stored.
  expect(await runEnvironment(jobs, 1)).toEqual([expect.objectContaining({ id: jobId, status: "Succeeded", applied: 2_000 })]);
  expect(db.select().from(assetsTable).all()).toHaveLength(2_000);
});
