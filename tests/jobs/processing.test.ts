import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { importAndWait, importBatch, postJson, waitForJob } from "../helpers/api";
import { asset, assets, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

let server: TestServer;
beforeAll(async () => {
  // Two worker threads, so that the order of one environment's jobs is the scheduler's doing, not a lone thread's.
  server = await startTestServer({ workers: 2 });
  await seedReferenceData(server.base, server.key);
});
afterAll(() => server.close());

const storedAsset = (id: string) =>
  fetch(`${server.base}/v2/assets/${id}`, { headers: { "api-key": server.key } }).then(async (r) => (r.status === 200 ? r.json() : undefined));

describe("applying a job", () => {
  test("a record naming an unknown sub area is rejected; the rest are applied (PartiallySucceeded)", async () => {
    const batch = [asset(100), asset(101, { subAreaId: "atlantis" }), asset(102)];
    const job = await importAndWait(server.base, "assets", server.key, batch);
    expect(job.importJobStatus).toBe("PartiallySucceeded");
    expect(job.output).toMatchObject({ total: 3, applied: 2, rejected: 1 });
    expect(job.output!.errors).toEqual([
      { index: 1, id: asset(101).id, field: "subAreaId", message: expect.stringContaining("'Sub Area Id' 'atlantis' does not exist in this environment") },
    ]);
    expect(job.output!.message).toContain(`[1] '${asset(101).id}'`);
    expect(job.output!.message).toContain("subAreaId");
    expect(await storedAsset(asset(100).id)).toBeDefined();
    expect(await storedAsset(asset(101).id)).toBeUndefined();
  });

  test.each([
    ["assetTypeId", "no-such-type", "asset type"],
    ["assetCategoryId", "no-such-category", "asset category"],
  ])("an unknown %s is rejected at job time", async (field, value, noun) => {
    const job = await importAndWait(server.base, "assets", server.key, [asset(110), asset(111, { [field]: value })]);
    expect(job.importJobStatus).toBe("PartiallySucceeded");
    expect(job.output!.errors[0]).toMatchObject({ index: 1, field });
    expect(job.output!.message).toContain(`no such ${noun} in this environment`);
  });

  test("when every record is rejected the job Failed and nothing was applied", async () => {
    const job = await importAndWait(server.base, "assets", server.key, [asset(120, { subAreaId: "nowhere" }), asset(121, { assetTypeId: "nothing" })]);
    expect(job.importJobStatus).toBe("Failed");
    expect(job.output).toMatchObject({ total: 2, applied: 0, rejected: 2 });
    expect(job.output!.message).toContain("nothing was applied");
    expect(await storedAsset(asset(120).id)).toBeUndefined();
  });

  test("the same id twice in a batch fails the whole job, naming the ids and their indexes", async () => {
    const batch = [asset(130), asset(131), asset(130, { name: "again" }), asset(132)];
    const job = await importAndWait(server.base, "assets", server.key, batch);
    expect(job.importJobStatus).toBe("Failed");
    expect(job.output!.applied).toBe(0);
    expect(job.output!.message).toContain(`'${asset(130).id}' at [0], [2]`);
    expect(job.output!.errors.map((e) => e.index)).toEqual([0, 2]);
    expect(await storedAsset(asset(131).id)).toBeUndefined();
  });

  test("imports are upserts: a second import of an id updates it", async () => {
    await importAndWait(server.base, "assets", server.key, [asset(140, { name: "first" })]);
    const second = await importAndWait(server.base, "assets", server.key, [asset(140, { name: "second", status: "RET" })]);
    expect(second.importJobStatus).toBe("Succeeded");
    expect(await storedAsset(asset(140).id)).toMatchObject({ name: "second", status: "RET", lastJobId: second.id });
  });

  test("references may name records applied by an earlier job posted just before", async () => {
    await importBatch(server.base, "subareas", server.key, [{ id: "west", name: "West" }]);
    const job = await importAndWait(server.base, "assets", server.key, [asset(150, { subAreaId: "west" })]);
    expect(job.importJobStatus).toBe("Succeeded");
  });

  test("references are checked against the job's own environment only", async () => {
    const other = await server.addEnvironment("refs-elsewhere");
    const job = await importAndWait(other.base, "assets", other.key, [asset(160)]);
    expect(job.importJobStatus).toBe("Failed");
    expect(job.output!.errors.map((e) => e.field)).toEqual(["subAreaId"]);
  });

  test("jobs of one environment are applied strictly in acceptance order", async () => {
    const env = await server.addEnvironment("ordering");
    await seedReferenceData(env.base, env.key);
    const accepted = [];
    for (let version = 0; version < 8; version++) {
      // Alternate a big and a small batch so that a later job would finish first if they ran in parallel.
      const batch = version % 2 === 0 ? [...assets(3000, 10_000), asset(1, { name: `v${version}` })] : [asset(1, { name: `v${version}` })];
      accepted.push(await importBatch(env.base, "assets", env.key, batch));
    }
    const done = [];
    for (const job of accepted) done.push(await waitForJob(env.base, env.key, job.id));
    for (let i = 1; i < done.length; i++) {
      expect(done[i]!.id).toBeGreaterThan(done[i - 1]!.id);
      expect(Date.parse(done[i]!.startedAt!)).toBeGreaterThanOrEqual(Date.parse(done[i - 1]!.completedAt!));
    }
    const response = await fetch(`${env.base}/v2/assets/${asset(1).id}`, { headers: { "api-key": env.key } });
    expect(await response.json()).toMatchObject({ name: "v7", lastJobId: accepted[7]!.id });
  });

  test("a burst of one-record jobs from many clients: every one is accepted and ends with its own outcome", async () => {
    const env = await server.addEnvironment("burst");
    await seedReferenceData(env.base, env.key);
    const batches = Array.from({ length: 120 }, (_, i) => [asset(20_000 + i, i % 10 === 3 ? { subAreaId: "atlantis" } : {})]);
    const accepted = await Promise.all(batches.map((batch) => importBatch(env.base, "assets", env.key, batch)));
    expect(new Set(accepted.map((job) => job.id)).size).toBe(120);
    const done = await Promise.all(accepted.map((job) => waitForJob(env.base, env.key, job.id)));
    done.forEach((job, i) => {
      expect(job.recordCount).toBe(1);
      if (i % 10 === 3) expect(job.output).toMatchObject({ applied: 0, rejected: 1, errors: [{ index: 0, id: asset(20_000 + i).id, field: "subAreaId" }] });
      else expect(job).toMatchObject({ importJobStatus: "Succeeded", output: { applied: 1, rejected: 0 } });
      expect(job.startedAt).not.toBeNull();
    });
    expect(done.filter((job) => job.importJobStatus === "Failed")).toHaveLength(12);
  });

  test("a terminal job's payload is dropped", async () => {
    const job = await importAndWait(server.base, "assets", server.key, assets(20, 200));
    expect(await server.query("SELECT job_id FROM job_payloads WHERE job_id = ?", job.id)).toHaveLength(0);
    expect(await server.query("SELECT id FROM jobs WHERE id = ?", job.id)).toHaveLength(1);
  });

  test("the job and its payload are committed before the 202", async () => {
    const env = await server.addEnvironment("durable");
    const response = await postJson(env.base, "assets", env.key, assets(500, 300));
    expect(response.status).toBe(202);
    const { id } = await response.json();
    // One statement, so one snapshot: the job may be applied between two (its payload dropped, its outcome stored).
    const [job] = await server.query<{ recordCount: number; output: string | null; payloads: number }>(
      'SELECT record_count AS "recordCount", output, (SELECT count(*) FROM job_payloads WHERE job_id = jobs.id) AS payloads FROM jobs WHERE id = ?',
      id,
    );
    expect(job!.recordCount).toBe(500);
    // Either still queued with its payload, or already applied (payload dropped, outcome stored).
    expect(Number(job!.payloads) === 1 || job!.output !== null).toBe(true);
  });

  test("one transaction per job: a Failed batch leaves the table exactly as it was", async () => {
    const rows = async () => Number((await server.query<{ n: number }>("SELECT count(*) AS n FROM assets"))[0]!.n);
    const before = await rows();
    const job = await importAndWait(server.base, "assets", server.key, [...assets(1000, 5000), asset(5000)]);
    expect(job.importJobStatus).toBe("Failed");
    expect(await rows()).toBe(before);
  });
});
