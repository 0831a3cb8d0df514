import { afterAll, beforeAll, expect, test } from "bun:test";
import { importAndWait, importBatch, postJson, waitForJob, type JobDocument } from "../helpers/api";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

// Dry run (DECISIONS 7): ?dryRun=true queues a job like any other, in its environment's order; when its turn
// comes it applies nothing, and its output says what applying would have done against the data as of its turn.

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
});
afterAll(() => server.close());

const dryRun = async (resource: string, records: unknown[], headers: Record<string, string> = {}) => {
  const response = await fetch(`${server.base}/v2/${resource}?dryRun=true`, {
    method: "POST",
    headers: { "api-key": server.key, "content-type": "application/json", ...headers },
    body: JSON.stringify(records),
  });
  expect(response.status).toBe(202);
  return (await response.json()) as JobDocument & { dryRun: boolean };
};
const read = async (resource: string, id: string) => fetch(`${server.base}/v2/${resource}/${id}`, { headers: { "api-key": server.key } });

test("a dry run reports what applying would do, created, updated and unchanged, and changes nothing", async () => {
  const real = await importAndWait(server.base, "assettypes", server.key, [{ id: "d1", name: "One" }, { id: "d2", name: "Two" }]);
  expect((real as JobDocument & { dryRun: boolean }).dryRun).toBe(false);
  const before = await (await read("assettypes", "d1")).json();

  const accepted = await dryRun("assettypes", [{ id: "d1", name: "One, renamed" }, { id: "d2", name: "Two" }, { id: "d3", name: "Three" }]);
  expect(accepted.dryRun).toBe(true);
  const done = (await waitForJob(server.base, server.key, accepted.id)) as JobDocument & { dryRun: boolean };
  expect(done.dryRun).toBe(true);
  expect(done.importJobStatus).toBe("Succeeded");
  expect(done.output).toMatchObject({ total: 3, applied: 3, rejected: 0, created: 1, updated: 1, unchanged: 1 });
  expect(done.output!.message).toBe("Dry run: nothing was applied. All 3 records would be applied (1 created, 1 updated, 1 unchanged).");
  expect(await (await read("assettypes", "d1")).json()).toEqual(before);
  expect((await read("assettypes", "d3")).status).toBe(404);
});

test("a dry run's rejected records are reported and downloadable; the records it would apply are not applied", async () => {
  const accepted = await dryRun("assets", [asset(500), asset(501, { subAreaId: "nowhere" })]);
  const done = await waitForJob(server.base, server.key, accepted.id);
  expect(done.importJobStatus).toBe("PartiallySucceeded");
  expect(done.output).toMatchObject({ applied: 1, rejected: 1, created: 1 });
  // Worded for what it is, not "…would have done: 1 of 2 records were rejected".
  expect(done.output!.message).toStartWith("Dry run: nothing was applied. 1 of 2 records would be rejected and 1 applied (1 created, 0 updated, 0 unchanged).");
  const rejected = await (await fetch(`${server.base}/v2/status/${done.id}/rejected`, { headers: { "api-key": server.key } })).json();
  expect(rejected.items).toHaveLength(1);
  expect(rejected.items[0]).toMatchObject({ index: 1, field: "subAreaId", record: { id: "A-0000501" } });
  expect((await read("assets", "A-0000500")).status).toBe(404);
});

test("a dry run of a batch that applying would refuse as a whole says so once, without a second 'nothing was applied'", async () => {
  const done = await waitForJob(server.base, server.key, (await dryRun("subareas", [{ id: "twice", name: "One" }, { id: "twice", name: "Two" }])).id);
  expect(done.importJobStatus).toBe("Failed");
  expect(done.output!.message).toStartWith("Dry run: nothing was applied. Applying it would fail: the batch contains 1 id more than once: 'twice' at [0], [1].");
});

test("a dry run takes its turn in its environment's order: it sees the jobs before it, and the jobs after it do not see it", async () => {
  // Sent one after the other without waiting: before (creates n1), the dry run (n1 again, n2 new), after (n2).
  const before = await importBatch(server.base, "subareas", server.key, [{ id: "n1", name: "N1" }]);
  const dry = await dryRun("subareas", [{ id: "n1", name: "N1" }, { id: "n2", name: "N2" }]);
  const after = await importBatch(server.base, "subareas", server.key, [{ id: "n2", name: "N2" }]);
  const [b, d, a] = [await waitForJob(server.base, server.key, before.id), await waitForJob(server.base, server.key, dry.id), await waitForJob(server.base, server.key, after.id)];
  expect(b.output).toMatchObject({ created: 1 });
  expect(d.output).toMatchObject({ created: 1, unchanged: 1 });
  expect(a.output).toMatchObject({ created: 1 });
  expect(Date.parse(d.completedAt!)).toBeGreaterThanOrEqual(Date.parse(b.completedAt!));
  expect(Date.parse(a.completedAt!)).toBeGreaterThanOrEqual(Date.parse(d.completedAt!));
});

test("GET /v2/jobs?dryRun= lists only dry runs, or only real imports; a dryRun that is not true or false is a 400", async () => {
  const list = async (query: string) =>
    ((await (await fetch(`${server.base}/v2/jobs?limit=200${query}`, { headers: { "api-key": server.key } })).json()) as { items: Array<{ dryRun: boolean }> }).items;
  const dry = await list("&dryRun=true");
  expect(dry.length).toBeGreaterThanOrEqual(3);
  expect(dry.every((job) => job.dryRun)).toBe(true);
  const real = await list("&dryRun=false");
  expect(real.length).toBeGreaterThan(0);
  expect(real.every((job) => !job.dryRun)).toBe(true);
  expect((await list("")).length).toBe(dry.length + real.length);

  const bad = await fetch(`${server.base}/v2/subareas?dryRun=maybe`, { method: "POST", headers: { "api-key": server.key, "content-type": "application/json" }, body: "[]" });
  expect(bad.status).toBe(400);
  expect((await bad.json()).errors).toEqual({ dryRun: ["'dryRun' must be true or false. You entered 'maybe'."] });
  expect((await fetch(`${server.base}/v2/jobs?dryRun=yes`, { headers: { "api-key": server.key } })).status).toBe(400);
});

test("an Idempotency-Key used for a dry run is not replayed by the real import of the same body", async () => {
  const records = [{ id: "k1", name: "K1" }];
  const dry = await dryRun("subareas", records, { "idempotency-key": "try-then-do" });
  const replay = await dryRun("subareas", records, { "idempotency-key": "try-then-do" });
  expect(replay.id).toBe(dry.id);
  const real = await postJson(server.base, "subareas", server.key, records, { "idempotency-key": "try-then-do" });
  expect(real.status).toBe(422);
});
