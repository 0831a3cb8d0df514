import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { getJob, importAndWait, importBatch, postJson, waitForJob } from "../helpers/api";
import { asset, assets, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
});
afterAll(() => server.close());

describe("POST /{env}/v2/<resource>", () => {
  test("answers 202 with a Pending job document, Location, Retry-After, createdAt and recordCount", async () => {
    const before = Date.now();
    const response = await postJson(server.base, "assets", server.key, assets(3));
    expect(response.status).toBe(202);
    const job = await response.json();
    expect(job).toMatchObject({ importJobType: "Asset", importJobStatus: "Pending", output: null, recordCount: 3, startedAt: null, completedAt: null });
    expect(job.id).toBeGreaterThan(0);
    expect(job.statusUrl).toBe(`/v2/status/${job.id}`);
    expect(response.headers.get("location")).toBe(`/default/v2/status/${job.id}`);
    expect(response.headers.get("retry-after")).toBe("1");
    expect(Date.parse(job.createdAt)).toBeGreaterThanOrEqual(before - 1000);
    expect(job.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  test.each([
    ["subareas", "SubArea", { id: "east", name: "East" }],
    ["assettypes", "AssetType", { id: "hydrant", name: "Hydrant" }],
    ["assetcategories", "AssetCategory", { id: "gas", name: "Gas network" }],
    // A record no other test here imports: one equal to a stored record would be unchanged, its lastJobId kept.
    ["assets", "Asset", asset(4242)],
  ])("imports %s as %s jobs and reads the record back", async (resource, jobType, record) => {
    const job = await importAndWait(server.base, resource, server.key, [record]);
    expect(job.importJobType).toBe(jobType);
    expect(job.importJobStatus).toBe("Succeeded");
    const response = await fetch(`${server.base}/v2/${resource}/${record.id}`, { headers: { "api-key": server.key } });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ ...record, lastJobId: job.id });
  });

  test("Location leads to the job's status", async () => {
    const response = await postJson(server.base, "assets", server.key, [asset(7)]);
    const location = response.headers.get("location")!;
    const done = await waitForJob(server.base, server.key, (await response.json()).id);
    const viaLocation = await fetch(`${server.url}${location}`, { headers: { "api-key": server.key } });
    expect((await viaLocation.json()).id).toBe(done.id);
  });

  test("a job document reports startedAt and completedAt once terminal", async () => {
    const accepted = await importBatch(server.base, "assets", server.key, [asset(8)]);
    const job = await waitForJob(server.base, server.key, accepted.id);
    expect(job.startedAt).not.toBeNull();
    expect(job.completedAt).not.toBeNull();
    expect(Date.parse(job.completedAt!)).toBeGreaterThanOrEqual(Date.parse(job.startedAt!));
    expect(Date.parse(job.startedAt!)).toBeGreaterThanOrEqual(Date.parse(job.createdAt));
    expect((await getJob(server.base, server.key, accepted.id)).output?.message).toBe("The record was applied (1 created, 0 updated, 0 unchanged).");
  });
});
