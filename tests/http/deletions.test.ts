import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { importAndWait, postJson, waitForJob, type JobDocument } from "../helpers/api";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

// Delete jobs and tombstones (DECISIONS 13), through the real server: POST /v2/deletions/<resource> queues a job in the
// environment's one order with imports; what it deleted answers 404 saying who and when, and GET
// /v2/deletions/<resource> pages the deletions in the order they happened.

type DeleteJob = JobDocument & { operation: string; dryRun: boolean; output: null | (NonNullable<JobDocument["output"]> & { deleted?: number; notFound?: number }) };
type Page = { items: Array<{ id: string; deletedAt: string; deletedByJobId: number }>; nextCursor: string | null; resumeCursor: string };

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
});
afterAll(() => server.close());

const send = (resource: string, ids: unknown, headers: Record<string, string> = {}, base = server.base, key = server.key) => postJson(base, `deletions/${resource}`, key, ids, headers);
async function deleteIds(resource: string, ids: unknown[], { dryRun = false, base = server.base, key = server.key } = {}): Promise<DeleteJob> {
  const response = await send(`${resource}${dryRun ? "?dryRun=true" : ""}`, ids, {}, base, key);
  const body = await response.json();
  if (response.status !== 202) throw new Error(`expected 202, got ${response.status}: ${JSON.stringify(body)}`);
  return body as DeleteJob;
}
const deleteAndWait = async (resource: string, ids: unknown[], options: { dryRun?: boolean; base?: string; key?: string } = {}) =>
  (await waitForJob(options.base ?? server.base, options.key ?? server.key, (await deleteIds(resource, ids, options)).id)) as DeleteJob;
const read = (resource: string, id: string, base = server.base, key = server.key) => fetch(`${base}/v2/${resource}/${encodeURIComponent(id)}`, { headers: { "api-key": key } });
const tombstones = async (resource: string, query = ""): Promise<Page> => {
  const response = await fetch(`${server.base}/v2/deletions/${resource}${query}`, { headers: { "api-key": server.key } });
  expect(response.status).toBe(200);
  return (await response.json()) as Page;
};

describe("POST /{env}/v2/deletions/<resource>", () => {
  test("answers 202 with a Pending job document whose operation is delete, with Location and Retry-After", async () => {
    const response = await send("assettypes", ["never-there"]);
    expect(response.status).toBe(202);
    const job = (await response.json()) as DeleteJob;
    expect(job).toMatchObject({ importJobType: "AssetType", operation: "delete", importJobStatus: "Pending", recordCount: 1, dryRun: false, output: null });
    expect(response.headers.get("location")).toBe(`/default/v2/status/${job.id}`);
    expect(response.headers.get("retry-after")).toBe("1");
    const done = (await waitForJob(server.base, server.key, job.id)) as DeleteJob;
    expect(done).toMatchObject({ importJobStatus: "Succeeded", operation: "delete", output: { total: 1, applied: 1, rejected: 0, deleted: 0, notFound: 1 } });
  });

  test("deletes what exists, counts unknown and repeated ids notFound, and rejects a record others refer to, naming how many and one of them", async () => {
    await importAndWait(server.base, "subareas", server.key, [{ id: "east", name: "East" }, { id: "west", name: "West" }]);
    await importAndWait(server.base, "assets", server.key, [asset(101, { subAreaId: "east" }), asset(103, { subAreaId: "east" }), asset(105, { subAreaId: "east" })]);
    const done = await deleteAndWait("subareas", ["east", "west", "nowhere", "west"]);
    const reason = `3 assets refer to sub area 'east' (for example '${asset(101).id}'): delete them or change their subAreaId first.`;
    expect(done.importJobStatus).toBe("PartiallySucceeded");
    expect(done.output).toMatchObject({ total: 4, applied: 3, rejected: 1, deleted: 1, notFound: 2, errors: [{ index: 0, id: "east", field: "id", message: reason }] });
    expect(done.output!.message).toBe(`Deleted 1 of 4 sub area records; 2 were not found (never imported, or already deleted); 1 was rejected: [0] ${reason}`);
    const rejected = await (await fetch(`${server.base}/v2/status/${done.id}/rejected`, { headers: { "api-key": server.key } })).json();
    expect(rejected).toEqual({ items: [{ index: 0, id: "east", field: "id", message: reason, record: { id: "east" } }], nextCursor: null });
    // Nothing cascades: the sub area and its assets stay.
    expect((await read("subareas", "east")).status).toBe(200);
    expect((await read("assets", asset(103).id)).status).toBe(200);
    expect((await read("subareas", "west")).status).toBe(404);
  });

  test("a record deleted answers 404 saying by which job and when, with deletedByJobId and deletedAt", async () => {
    await importAndWait(server.base, "assets", server.key, [asset(201)]);
    const done = await deleteAndWait("assets", [asset(201).id]);
    expect(done.output).toMatchObject({ deleted: 1, notFound: 0 });
    expect(done.output!.message).toBe("Deleted 1 of 1 asset record.");
    const response = await read("assets", asset(201).id);
    expect(response.status).toBe(404);
    const problem = await response.json();
    expect(problem).toMatchObject({ status: 404, deletedByJobId: done.id });
    expect(problem.detail).toBe(`The asset '${asset(201).id}' was deleted by job ${done.id} at ${problem.deletedAt}.`);
    expect(Date.parse(problem.deletedAt)).toBeGreaterThanOrEqual(Date.parse(done.startedAt!));
    // An id never imported is the plain 404.
    expect((await (await read("assets", "never-imported")).json()).deletedByJobId).toBeUndefined();
  });

  test("the deletions page in the order they happened, not by id; the last page's resumeCursor brings only later deletions, a smaller id's too", async () => {
    await importAndWait(server.base, "assetcategories", server.key, ["m", "z", "b", "a"].map((id) => ({ id, name: id.toUpperCase() })));
    const first = await deleteAndWait("assetcategories", ["z", "m"]);
    const page = await tombstones("assetcategories", "?limit=1");
    expect(page.items).toEqual([{ id: "z", deletedAt: expect.any(String), deletedByJobId: first.id }]);
    expect(page.nextCursor).toBe(page.resumeCursor);
    const rest = await tombstones("assetcategories", `?limit=10&after=${page.nextCursor}`);
    expect(rest.items.map((item) => item.id)).toEqual(["m"]);
    // The last page: nextCursor null, as on every list (a client's paging loop ends), and a cursor to come back with.
    expect(rest.nextCursor).toBeNull();
    expect(rest.resumeCursor).not.toBe(page.resumeCursor);
    // Nothing newer yet: an empty page that gives the cursor back.
    expect(await tombstones("assetcategories", `?after=${rest.resumeCursor}`)).toEqual({ items: [], nextCursor: null, resumeCursor: rest.resumeCursor });
    const later = await deleteAndWait("assetcategories", ["a"]);
    expect(await tombstones("assetcategories", `?after=${rest.resumeCursor}`)).toMatchObject({ items: [{ id: "a", deletedByJobId: later.id }], nextCursor: null });
    expect((await tombstones("assetcategories")).items.map((item) => item.id)).toEqual(["z", "m", "a"]);
    const bad = await fetch(`${server.base}/v2/deletions/assetcategories?after=abc`, { headers: { "api-key": server.key } });
    expect(bad.status).toBe(400);
    expect(Object.keys((await bad.json()).errors)).toEqual(["after"]);
  });

  test("importing a deleted id again creates the record and ends its tombstone", async () => {
    await importAndWait(server.base, "assettypes", server.key, [{ id: "hydrant", name: "Hydrant" }]);
    await deleteAndWait("assettypes", ["hydrant"]);
    expect((await tombstones("assettypes")).items.map((item) => item.id)).toContain("hydrant");
    const again = await importAndWait(server.base, "assettypes", server.key, [{ id: "hydrant", name: "Hydrant, again" }]);
    expect(await (await read("assettypes", "hydrant")).json()).toMatchObject({ name: "Hydrant, again", lastJobId: again.id });
    expect((await tombstones("assettypes")).items.map((item) => item.id)).not.toContain("hydrant");
  });

  test("a dry run deletes nothing and says what would be deleted", async () => {
    await importAndWait(server.base, "assets", server.key, [asset(301)]);
    const done = await deleteAndWait("assets", [asset(301).id, "not-there"], { dryRun: true });
    expect(done).toMatchObject({ dryRun: true, operation: "delete", importJobStatus: "Succeeded", output: { deleted: 1, notFound: 1 } });
    expect(done.output!.message).toBe("Dry run: nothing was applied. Would delete 1 of 2 asset records; 1 was not found (never imported, or already deleted).");
    expect((await read("assets", asset(301).id)).status).toBe(200);
    expect((await tombstones("assets")).items.map((item) => item.id)).not.toContain(asset(301).id);
  });

  test.each([
    ["an object", { id: "A-1" }, "$", 'The request body must be a JSON array of ids, for example ["A-1"]. You sent an object.'],
    ["an empty array", [], "$", "The request body must contain at least one id. You sent an empty array."],
    ["a number", [7], "[0]", `'Id' must be a non-empty string of at most 64 characters, e.g. "A-1". You sent a number.`],
    ["an empty string", ["ok", ""], "[1]", `'Id' must be a non-empty string of at most 64 characters, e.g. "A-1". You sent an empty string.`],
    ["a 65-character id", ["x".repeat(65)], "[0]", `'Id' must be a non-empty string of at most 64 characters, e.g. "A-1". You sent 65 characters.`],
    ["a record", [{ id: "A-1" }], "[0]", `'Id' must be a non-empty string of at most 64 characters, e.g. "A-1". You sent an object.`],
  ])("refuses %s with a 400 under %s that says what to send", async (_, body, key, message) => {
    const response = await send("assets", body);
    expect(response.status).toBe(400);
    expect(response.headers.get("content-type")).toContain("application/problem+json");
    expect((await response.json()).errors).toEqual({ [key]: [message] });
  });

  test("a 64-character id is taken", async () => {
    const done = await deleteAndWait("assets", ["x".repeat(64)]);
    expect(done.output).toMatchObject({ notFound: 1 });
  });

  test("Idempotency-Key: the same deletion again is the same job; another body, or an import with the same key, is 422", async () => {
    const first = await send("assettypes", ["idem-1"], { "idempotency-key": "delete-once" });
    expect(first.status).toBe(202);
    const job = await first.json();
    const replay = await send("assettypes", ["idem-1"], { "idempotency-key": "delete-once" });
    expect(replay.status).toBe(202);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect((await replay.json()).id).toBe(job.id);
    expect((await send("assettypes", ["idem-2"], { "idempotency-key": "delete-once" })).status).toBe(422);
    expect((await send("subareas", ["idem-1"], { "idempotency-key": "delete-once" })).status).toBe(422);
    // A key an import used is not a deletion's: the two are different requests.
    expect((await postJson(server.base, "assettypes", server.key, [{ id: "idem-3", name: "Three" }], { "idempotency-key": "import-then-delete" })).status).toBe(202);
    expect((await send("assettypes", ["idem-3"], { "idempotency-key": "import-then-delete" })).status).toBe(422);
  });
});

test("a delete job canceled while Pending deletes nothing, and says so in a delete job's words", async () => {
  // Behind a job that stays Pending (parked: nothing wakes the scheduler for it, or, on PostgreSQL, its environment is held).
  const parked = await server.parkJob("default", "until released");
  try {
    const store = await server.store();
    const body = new TextEncoder().encode(JSON.stringify(["a", "b"]));
    const [queued] = await store.queue.enqueue([{ environmentId: parked.environmentId, type: "Asset", recordCount: 2, body, operation: "delete" }]);
    const id = queued!.conflict ? 0 : queued!.job.id;
    const response = await fetch(`${server.base}/v2/status/${id}/cancel`, { method: "POST", headers: { "api-key": server.key } });
    expect(response.status).toBe(200);
    expect((await response.json()) as DeleteJob).toMatchObject({
      operation: "delete",
      importJobStatus: "Failed",
      output: { canceled: true, total: 2, applied: 0, deleted: 0, notFound: 0, message: "Canceled on request before it started: nothing was deleted (2 ids not looked at). Send them again to delete them." },
    });
  } finally {
    await parked.release();
  }
});

describe("deletes and imports of one environment apply in the order they were accepted", () => {
  test("import X, delete X, import X again, sent without waiting: X exists at the end; import Y, delete Y: Y is gone", async () => {
    const accepted: number[] = [];
    const post = async (response: Promise<Response>) => {
      const answer = await response;
      expect(answer.status).toBe(202);
      accepted.push((await answer.json()).id);
    };
    await post(postJson(server.base, "subareas", server.key, [{ id: "order-x", name: "X" }]));
    await post(send("subareas", ["order-x"]));
    await post(postJson(server.base, "subareas", server.key, [{ id: "order-x", name: "X again" }]));
    await post(postJson(server.base, "subareas", server.key, [{ id: "order-y", name: "Y" }]));
    await post(send("subareas", ["order-y"]));
    const jobs = [];
    for (const id of accepted) jobs.push((await waitForJob(server.base, server.key, id)) as DeleteJob);
    expect(jobs.map((job) => [job.operation, job.importJobStatus])).toEqual([
      ["upsert", "Succeeded"],
      ["delete", "Succeeded"],
      ["upsert", "Succeeded"],
      ["upsert", "Succeeded"],
      ["delete", "Succeeded"],
    ]);
    expect(jobs[1]!.output).toMatchObject({ deleted: 1 });
    expect(jobs[2]!.output).toMatchObject({ created: 1 });
    expect(await (await read("subareas", "order-x")).json()).toMatchObject({ name: "X again", lastJobId: accepted[2] });
    expect((await read("subareas", "order-y")).status).toBe(404);
  });

  test("an import that refers to a record deleted before it, accepted after the delete, is rejected as unknown", async () => {
    await importAndWait(server.base, "subareas", server.key, [{ id: "doomed", name: "Doomed" }]);
    const deletion = await deleteIds("subareas", ["doomed"]);
    const late = await postJson(server.base, "assets", server.key, [asset(401, { subAreaId: "doomed" })]);
    const lateJob = await waitForJob(server.base, server.key, (await late.json()).id);
    expect((await waitForJob(server.base, server.key, deletion.id)).importJobStatus).toBe("Succeeded");
    expect(lateJob.importJobStatus).toBe("Failed");
    expect(lateJob.output!.errors[0]).toMatchObject({ field: "subAreaId" });
  });
});

describe("GET /{env}/v2/jobs?operation=", () => {
  test("narrows the list to delete jobs, or to imports; anything else is a 400 that names the values", async () => {
    const deletion = await deleteAndWait("assets", ["listed"]);
    const list = async (query: string) => (await (await fetch(`${server.base}/v2/jobs?${query}`, { headers: { "api-key": server.key } })).json()) as { items: DeleteJob[] };
    const deletes = await list("operation=delete&limit=1000");
    expect(deletes.items.map((job) => job.id)).toContain(deletion.id);
    expect(new Set(deletes.items.map((job) => job.operation))).toEqual(new Set(["delete"]));
    const upserts = await list("operation=upsert&limit=1000");
    expect(upserts.items.length).toBeGreaterThan(0);
    expect(new Set(upserts.items.map((job) => job.operation))).toEqual(new Set(["upsert"]));
    const bad = await fetch(`${server.base}/v2/jobs?operation=bogus`, { headers: { "api-key": server.key } });
    expect(bad.status).toBe(400);
    expect((await bad.json()).errors).toEqual({ operation: ["'Operation' must be one of: upsert, delete, syncCompletion. You entered 'bogus'."] });
  });
});

test("another environment's records are untouched by a deletion, and its deletions are its own", async () => {
  const other = await server.addEnvironment("deletes-elsewhere");
  await importAndWait(other.base, "subareas", other.key, [{ id: "shared-id", name: "Theirs" }]);
  await importAndWait(server.base, "subareas", server.key, [{ id: "shared-id", name: "Ours" }]);
  const done = await deleteAndWait("subareas", ["shared-id"]);
  expect(done.output).toMatchObject({ deleted: 1 });
  expect(await (await read("subareas", "shared-id", other.base, other.key)).json()).toMatchObject({ name: "Theirs" });
  const theirs = await (await fetch(`${other.base}/v2/deletions/subareas`, { headers: { "api-key": other.key } })).json();
  expect(theirs).toEqual({ items: [], nextCursor: null, resumeCursor: "0" });
});
