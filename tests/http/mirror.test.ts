import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { importAndWait, importBatch, postJson, waitForJob, type JobDocument } from "../helpers/api";
import { asset, seedReferenceData, subAreas } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

// The mirror (a sync, DECISIONS 13), through the real server: POST /v2/syncs opens one, imports with ?sync= join it,
// and POST /v2/syncs/{id}/complete queues the job that deletes what the sync did not send, under its guards.

type Environment = { slug: string; key: string; base: string };
type Job = JobDocument & { operation: string; dryRun: boolean; output: null | (NonNullable<JobDocument["output"]> & { deleted?: number }) };
type Sync = {
  id: number;
  resource: string;
  state: string;
  url: string;
  createdAt: string;
  expiresAt: string;
  completedAt: string | null;
  completedByJobId: number | null;
  recordsSent: number;
  jobs: Array<{ id: number; operation: string; importJobStatus: string; dryRun: boolean; recordCount: number }>;
  lastCompletion: Job | null;
};

let server: TestServer;
let environments = 0;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

/** An environment of the test's own: the guards count every record of the resource in it. */
async function environment(): Promise<Environment> {
  return server.addEnvironment(`mirror-${++environments}`);
}

const subareas = (from: number, to: number, name = "Area") => Array.from({ length: to - from + 1 }, (_, i) => ({ id: `s${String(from + i).padStart(3, "0")}`, name: `${name} ${from + i}` }));

const post = (env: Environment, path: string, body?: unknown) =>
  fetch(`${env.base}/v2/${path}`, { method: "POST", headers: { "content-type": "application/json", "api-key": env.key }, ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }) });
const get = (env: Environment, path: string) => fetch(`${env.base}/v2/${path}`, { headers: { "api-key": env.key } });

async function openSync(env: Environment, resource = "subareas"): Promise<Sync> {
  const response = await post(env, "syncs", { resource });
  const body = await response.json();
  if (response.status !== 201) throw new Error(`expected 201, got ${response.status}: ${JSON.stringify(body)}`);
  return body as Sync;
}
const join = async (env: Environment, sync: Sync, records: unknown[], query = "") => (await waitForJob(env.base, env.key, (await importBatch(env.base, `${sync.resource}?sync=${sync.id}${query}`, env.key, records)).id)) as Job;
async function complete(env: Environment, sync: Sync, query = ""): Promise<Job> {
  const response = await post(env, `syncs/${sync.id}/complete${query}`);
  const body = await response.json();
  if (response.status !== 202) throw new Error(`expected 202, got ${response.status}: ${JSON.stringify(body)}`);
  expect(response.headers.get("location")).toBe(`/${env.slug}/v2/status/${body.id}`);
  return (await waitForJob(env.base, env.key, body.id)) as Job;
}
const syncOf = async (env: Environment, sync: Sync) => {
  const response = await get(env, `syncs/${sync.id}`);
  expect(response.status).toBe(200);
  return (await response.json()) as Sync;
};
const exists = async (env: Environment, resource: string, id: string) => (await get(env, `${resource}/${id}`)).status === 200;
const ids = async (env: Environment, resource: string) => ((await (await get(env, `${resource}?limit=1000`)).json()).items as Array<{ id: string }>).map((record) => record.id);

describe("POST /{env}/v2/syncs", () => {
  test("opens a sync: 201 with its document and Location, open, expiring 24 hours after it opened", async () => {
    const env = await environment();
    const response = await post(env, "syncs", { resource: "assets" });
    expect(response.status).toBe(201);
    const sync = (await response.json()) as Sync;
    expect(response.headers.get("location")).toBe(`/${env.slug}/v2/syncs/${sync.id}`);
    expect(sync).toMatchObject({ resource: "assets", state: "open", url: `/v2/syncs/${sync.id}`, completedAt: null, completedByJobId: null, recordsSent: 0, jobs: [], lastCompletion: null });
    expect(Date.parse(sync.expiresAt) - Date.parse(sync.createdAt)).toBe(24 * 60 * 60 * 1000);
  });

  test("an unknown resource, a body that is not an object and one that is not JSON are 400, keyed by field", async () => {
    const env = await environment();
    const unknown = await post(env, "syncs", { resource: "asset" });
    expect(unknown.status).toBe(400);
    expect((await unknown.json()).errors).toEqual({ resource: ["'Resource' must be the path of the resource to mirror, one of: subareas, assettypes, assetcategories, assets. You entered 'asset'."] });
    const none = await post(env, "syncs", {});
    expect((await none.json()).errors.resource[0]).toEndWith("You sent none.");
    const list = await post(env, "syncs", ["assets"]);
    expect(list.status).toBe(400);
    expect((await list.json()).errors).toHaveProperty("$");
    const broken = await post(env, "syncs", "{resource");
    expect(broken.status).toBe(400);
    expect((await broken.json()).errors.$[0]).toStartWith("The body is not valid JSON.");
  });
});

describe("a mirror, start to end", () => {
  test("two chunks join; a dry run's count is exact and deletes nothing; the completion deletes exactly the records not sent, with tombstones; a second mirror deletes nothing", async () => {
    const env = await environment();
    await importAndWait(env.base, "subareas", env.key, subareas(1, 20));
    const sync = await openSync(env);
    // The source dropped s009 and s015, renamed s001, and kept the rest.
    const source = subareas(1, 20).filter((record) => record.id !== "s009" && record.id !== "s015");
    source[0]!.name = "Renamed";
    const first = await join(env, sync, source.slice(0, 10));
    const second = await join(env, sync, source.slice(10));
    expect([first.importJobStatus, second.importJobStatus]).toEqual(["Succeeded", "Succeeded"]);
    expect((await syncOf(env, sync)).recordsSent).toBe(18);

    const dryRun = await complete(env, sync, "?dryRun=true");
    expect(dryRun).toMatchObject({ operation: "syncCompletion", importJobType: "SubArea", dryRun: true, importJobStatus: "Succeeded", output: { total: 2, deleted: 2, rejected: 0 } });
    expect(dryRun.output!.message).toStartWith("Dry run: nothing was applied. Would delete 2 of 2 sub area records.");
    expect(dryRun.output!.message).toContain("The sync stays open");
    expect(await exists(env, "subareas", "s009")).toBe(true);
    expect((await syncOf(env, sync)).state).toBe("open");

    const done = await complete(env, sync);
    expect(done).toMatchObject({ operation: "syncCompletion", dryRun: false, importJobStatus: "Succeeded", output: { total: 2, applied: 2, deleted: 2, rejected: 0, errors: [] } });
    expect(done.output!.message).toBe(
      "Deleted 2 of 2 sub area records. Considered: the 2 sub area records of 20 that no job of sync " + sync.id + " sent and no other job wrote since it opened (18 kept). The sync is completed.",
    );
    expect(await ids(env, "subareas")).toEqual(source.map((record) => record.id));
    const gone = await get(env, "subareas/s015");
    expect(gone.status).toBe(404);
    expect(await gone.json()).toMatchObject({ deletedByJobId: done.id });
    const deletions = await (await get(env, "deletions/subareas")).json();
    expect(deletions.items.map((item: { id: string }) => item.id)).toEqual(["s009", "s015"]);

    const ended = await syncOf(env, sync);
    expect(ended).toMatchObject({ state: "completed", completedByJobId: done.id, recordsSent: 18, lastCompletion: { id: done.id, importJobStatus: "Succeeded" } });
    expect(ended.jobs.map((job) => [job.id, job.operation, job.dryRun])).toEqual([
      [first.id, "upsert", false],
      [second.id, "upsert", false],
      [dryRun.id, "syncCompletion", true],
      [done.id, "syncCompletion", false],
    ]);

    // Joining or completing an ended sync is 409, saying to open a new one.
    const late = await postJson(env.base, `subareas?sync=${sync.id}`, env.key, subareas(1, 1));
    expect(late.status).toBe(409);
    expect((await late.json()).detail).toBe(`Sync ${sync.id} is completed (by job ${done.id} at ${ended.completedAt}): it can no longer take imports. Open a new sync with POST /v2/syncs.`);
    const again = await post(env, `syncs/${sync.id}/complete`);
    expect(again.status).toBe(409);
    expect((await again.json()).detail).toContain("it can no longer be completed. Open a new sync");

    // The same source mirrored again: nothing to delete.
    const next = await openSync(env);
    await join(env, next, source);
    const nothing = await complete(env, next);
    expect(nothing).toMatchObject({ importJobStatus: "Succeeded", output: { total: 0, deleted: 0, rejected: 0 } });
    expect(await ids(env, "subareas")).toEqual(source.map((record) => record.id));
  });

  test("a record another job (not of the sync) wrote after the sync opened is kept; one it left unchanged is not", async () => {
    const env = await environment();
    await importAndWait(env.base, "subareas", env.key, subareas(1, 30));
    const sync = await openSync(env);
    // Outside the sync, after it opened: a new record, a changed one, and one sent unchanged (not written, DECISIONS 7).
    await importAndWait(env.base, "subareas", env.key, [{ id: "new", name: "New" }, { id: "s029", name: "Changed" }, subareas(30, 30)[0]]);
    await join(env, sync, subareas(1, 28));
    const done = await complete(env, sync);
    expect(done.output).toMatchObject({ total: 1, deleted: 1 });
    expect(await exists(env, "subareas", "new")).toBe(true);
    expect(await exists(env, "subareas", "s029")).toBe(true);
    expect(await exists(env, "subareas", "s030")).toBe(false);
  });

  test("records the sync sent but rejected are not deleted; a record others refer to is rejected, not deleted", async () => {
    const env = await environment();
    await seedReferenceData(env.base, env.key);
    await importAndWait(env.base, "subareas", env.key, [{ id: "east", name: "East" }, ...subareas(1, 20)]);
    await importAndWait(env.base, "assets", env.key, [asset(1, { subAreaId: "east" }), asset(2), asset(3)]);
    const assetSync = await openSync(env, "assets");
    // asset 2 is sent with a subAreaId that does not exist: rejected, but sent.
    const sent = await join(env, assetSync, [asset(1, { subAreaId: "east" }), asset(2, { subAreaId: "nowhere" })]);
    expect(sent.importJobStatus).toBe("PartiallySucceeded");
    const assets = await complete(env, assetSync, "?maxDeletePercent=50");
    expect(assets.output).toMatchObject({ total: 1, deleted: 1 });
    expect(await exists(env, "assets", asset(2).id)).toBe(true);
    expect(await exists(env, "assets", asset(3).id)).toBe(false);

    // The sub areas but east, which asset 1 refers to.
    const sync = await openSync(env);
    await join(env, sync, [...subAreas, ...subareas(1, 20)]);
    const done = await complete(env, sync);
    expect(done.importJobStatus).toBe("Failed");
    expect(done.output).toMatchObject({ total: 1, deleted: 0, rejected: 1, errors: [{ id: "east", field: "id" }] });
    expect(done.output!.message).toContain(`1 asset refers to sub area 'east' ('${asset(1).id}')`);
    expect(done.output!.message).toContain("The sync stays open");
    const rejected = await (await get(env, `status/${done.id}/rejected`)).json();
    expect(rejected.items).toEqual([{ index: 0, id: "east", field: "id", message: done.output!.errors[0]!.message, record: { id: "east" } }]);
    expect(await exists(env, "subareas", "east")).toBe(true);
    expect((await syncOf(env, sync)).state).toBe("open");
  });

  test("a mirror tried whole, its imports and its completion all dry runs: the count is exact and nothing is applied; a real completion does not count what the dry runs sent", async () => {
    const env = await environment();
    await importAndWait(env.base, "subareas", env.key, subareas(1, 10));
    const sync = await openSync(env);
    // The source now has 1 to 9 (10 is gone) and a new 11, tried out.
    const tried = await join(env, sync, subareas(1, 9, "Renamed").concat(subareas(11, 11)), "&dryRun=true");
    expect(tried.output).toMatchObject({ created: 1, updated: 9 });
    expect((await syncOf(env, sync)).recordsSent).toBe(0);
    const dryRun = await complete(env, sync, "?dryRun=true");
    expect(dryRun.output).toMatchObject({ total: 1, deleted: 1, rejected: 0 });
    expect(dryRun.output!.message).toContain("Would delete 1 of 1 sub area record. Considered: the 1 sub area record of 10 that no job of sync");
    // Nothing applied: 10 is still there, 11 was not created, 1 not renamed.
    expect(await ids(env, "subareas")).toEqual(subareas(1, 10).map((record) => record.id));
    expect((await (await get(env, "subareas/s001")).json()).name).toBe("Area 1");
    // A real completion takes only what real imports sent: here nothing, so all 10 would go (over the 10% allowed).
    const real = await complete(env, sync);
    expect(real.importJobStatus).toBe("Failed");
    expect(real.output!.message).toStartWith("Nothing was deleted: the mirror would delete 10 of 10 sub area records (100%)");
    // Sent for real, the same records: then the real completion deletes the one the source no longer has.
    await join(env, sync, subareas(1, 9, "Renamed").concat(subareas(11, 11)));
    expect((await syncOf(env, sync)).recordsSent).toBe(10);
    const done = await complete(env, sync);
    expect(done.output).toMatchObject({ total: 1, deleted: 1 });
    expect(await ids(env, "subareas")).toEqual([...subareas(1, 9), ...subareas(11, 11)].map((record) => record.id));
  });
});

describe("guards", () => {
  test("more than 10% to delete fails the completion, nothing deleted, saying how many and how to allow it; completing again with ?maxDeletePercent works", async () => {
    const env = await environment();
    await importAndWait(env.base, "subareas", env.key, subareas(1, 20));
    const sync = await openSync(env);
    await join(env, sync, subareas(1, 17));
    const stopped = await complete(env, sync);
    expect(stopped).toMatchObject({ importJobStatus: "Failed", output: { total: 3, deleted: 0, applied: 0 } });
    expect(stopped.output!.message).toBe(
      "Nothing was deleted: the mirror would delete 3 of 20 sub area records (15%), more than the 10% allowed. If that is right, complete the sync again with ?maxDeletePercent=15 (or ?maxDelete=3).",
    );
    expect(await ids(env, "subareas")).toHaveLength(20);
    expect((await syncOf(env, sync)).state).toBe("open");

    const byCount = await complete(env, sync, "?maxDelete=2");
    expect(byCount.importJobStatus).toBe("Failed");
    expect(byCount.output!.message).toBe(
      "Nothing was deleted: the mirror would delete 3 of 20 sub area records (15%), more than the 2 allowed (maxDelete). If that is right, complete the sync again with ?maxDeletePercent=15 (or ?maxDelete=3).",
    );
    const dryRun = await complete(env, sync, "?dryRun=true");
    expect(dryRun.importJobStatus).toBe("Failed");
    expect(dryRun.output!.message).toStartWith("Dry run: nothing was applied. Applying it would fail: the mirror would delete 3 of 20");

    const done = await complete(env, sync, "?maxDeletePercent=15");
    expect(done).toMatchObject({ importJobStatus: "Succeeded", output: { total: 3, deleted: 3 } });
    expect(await ids(env, "subareas")).toEqual(subareas(1, 17).map((record) => record.id));
  });

  test("a job of the sync that failed as a whole (canceled) stops the completion, naming it; once its chunk is re-sent, completing again works", async () => {
    const env = await environment();
    await importAndWait(env.base, "subareas", env.key, subareas(1, 20));
    const sync = await openSync(env);
    await join(env, sync, subareas(1, 10));
    // The second chunk is canceled while Pending, behind a job that stays Pending.
    const parked = await server.parkJob(env.slug, "until released");
    let canceledId = 0;
    try {
      const store = await server.store();
      const body = new TextEncoder().encode(JSON.stringify(subareas(11, 20)));
      const [queued] = await store.queue.enqueue([{ environmentId: parked.environmentId, type: "SubArea", recordCount: 10, body, syncId: sync.id }]);
      canceledId = queued!.conflict ? 0 : queued!.job.id;
      const response = await post(env, `status/${canceledId}/cancel`);
      expect(response.status).toBe(200);
    } finally {
      await parked.release();
    }
    const stopped = await complete(env, sync, "?maxDeletePercent=100");
    expect(stopped).toMatchObject({ importJobStatus: "Failed", output: { deleted: 0 } });
    expect(stopped.output!.message).toStartWith(`Nothing was deleted: a job of sync ${sync.id} failed as a whole, so which records it sent is unknown: job ${canceledId} (10 records: Canceled on request`);
    expect(stopped.output!.message).toEndWith(`Re-send its records in the sync (POST /v2/subareas?sync=${sync.id}), then complete the sync again.`);
    expect(await ids(env, "subareas")).toHaveLength(20);

    await join(env, sync, subareas(11, 20));
    const done = await complete(env, sync);
    expect(done).toMatchObject({ importJobStatus: "Succeeded", output: { total: 0, deleted: 0 } });
    expect(await ids(env, "subareas")).toHaveLength(20);
  });
});

test("a completion canceled while Pending deletes nothing and leaves the sync open, saying so; it does not count as a failed job of the sync", async () => {
  const env = await environment();
  await importAndWait(env.base, "subareas", env.key, subareas(1, 20));
  const sync = await openSync(env);
  await join(env, sync, subareas(1, 19));
  const parked = await server.parkJob(env.slug, "until released");
  try {
    const store = await server.store();
    const [queued] = await store.queue.enqueue([{ environmentId: parked.environmentId, type: "SubArea", recordCount: 0, body: new TextEncoder().encode('{"maxDeletePercent":10}'), operation: "syncCompletion", syncId: sync.id }]);
    const response = await post(env, `status/${queued!.conflict ? 0 : queued!.job.id}/cancel`);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      operation: "syncCompletion",
      importJobStatus: "Failed",
      output: { canceled: true, deleted: 0, message: "Canceled on request before it started: nothing was deleted, and the sync stays open. Complete it again when you mean to." },
    });
  } finally {
    await parked.release();
  }
  expect((await syncOf(env, sync)).state).toBe("open");
  expect(await complete(env, sync)).toMatchObject({ importJobStatus: "Succeeded", output: { deleted: 1 } });
});

describe("refusals", () => {
  test("?sync= that is malformed, names no sync, or a sync of another resource is 400 under sync; an unknown sync is 404", async () => {
    const env = await environment();
    const sync = await openSync(env, "assettypes");
    const malformed = await postJson(env.base, "subareas?sync=abc", env.key, subareas(1, 1));
    expect(malformed.status).toBe(400);
    expect((await malformed.json()).errors).toEqual({ sync: ["'Sync' must be the id of an open sync, a whole number as POST /v2/syncs answered it. You entered 'abc'."] });
    const unknown = await postJson(env.base, "subareas?sync=999999", env.key, subareas(1, 1));
    expect(unknown.status).toBe(400);
    expect((await unknown.json()).errors).toEqual({ sync: ["There is no sync 999999 in this environment. Open one with POST /v2/syncs, and send its id."] });
    const elsewhere = await postJson(env.base, `subareas?sync=${sync.id}`, env.key, subareas(1, 1));
    expect(elsewhere.status).toBe(400);
    expect((await elsewhere.json()).errors).toEqual({
      sync: [`Sync ${sync.id} mirrors assettypes, not subareas: send these records to POST /v2/assettypes?sync=${sync.id}, or open a sync for subareas.`],
    });
    const deletion = await postJson(env.base, `deletions/assettypes?sync=${sync.id}`, env.key, ["pipe"]);
    expect(deletion.status).toBe(400);
    expect((await deletion.json()).errors).toEqual({ sync: ["Only an import joins a sync (POST /v2/assettypes?sync=<id>): the sync's completion deletes what its imports did not send."] });
    expect((await get(env, "syncs/999999")).status).toBe(404);
    expect((await get(env, "syncs/x")).status).toBe(404);
    expect((await post(env, "syncs/999999/complete")).status).toBe(404);
  });

  test("a completion's limits: a whole number from 0 to 100, or a count, not both", async () => {
    const env = await environment();
    const sync = await openSync(env);
    const tooMuch = await post(env, `syncs/${sync.id}/complete?maxDeletePercent=150`);
    expect(tooMuch.status).toBe(400);
    expect((await tooMuch.json()).errors.maxDeletePercent[0]).toStartWith("'Max Delete Percent' must be a whole number from 0 to 100");
    const both = await post(env, `syncs/${sync.id}/complete?maxDeletePercent=5&maxDelete=3`);
    expect(both.status).toBe(400);
    expect((await both.json()).errors).toEqual({ maxDelete: ["Give maxDeletePercent or maxDelete, not both: one limit says how much the completion may delete."] });
    const dryRun = await post(env, `syncs/${sync.id}/complete?dryRun=maybe`);
    expect(dryRun.status).toBe(400);
  });

  test("another environment can neither see nor join nor complete the sync", async () => {
    const env = await environment();
    const other = await environment();
    const sync = await openSync(env);
    expect((await get(other, `syncs/${sync.id}`)).status).toBe(404);
    expect((await post(other, `syncs/${sync.id}/complete`)).status).toBe(404);
    const joined = await postJson(other.base, `subareas?sync=${sync.id}`, other.key, subareas(1, 1));
    expect(joined.status).toBe(400);
    expect((await joined.json()).errors.sync[0]).toBe(`There is no sync ${sync.id} in this environment. Open one with POST /v2/syncs, and send its id.`);
  });

  test("an Idempotency-Key names one request: the same import in the sync is replayed, outside it (or in another sync) it is another request (422)", async () => {
    const env = await environment();
    const sync = await openSync(env);
    const other = await openSync(env);
    const headers = { "idempotency-key": "mirror-chunk-1" };
    const first = await postJson(env.base, `subareas?sync=${sync.id}`, env.key, subareas(1, 2), headers);
    expect(first.status).toBe(202);
    const replay = await postJson(env.base, `subareas?sync=${sync.id}`, env.key, subareas(1, 2), headers);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect((await replay.json()).id).toBe((await first.json()).id);
    expect((await postJson(env.base, "subareas", env.key, subareas(1, 2), headers)).status).toBe(422);
    expect((await postJson(env.base, `subareas?sync=${other.id}`, env.key, subareas(1, 2), headers)).status).toBe(422);
  });

  test("/v2/jobs?operation=syncCompletion lists the completions only", async () => {
    const env = await environment();
    await importAndWait(env.base, "subareas", env.key, subareas(1, 3));
    const sync = await openSync(env);
    const joined = await join(env, sync, subareas(1, 3));
    const done = await complete(env, sync);
    const list = await (await get(env, "jobs?operation=syncCompletion")).json();
    expect(list.items.map((job: Job) => job.id)).toEqual([done.id]);
    const upserts = await (await get(env, "jobs?operation=upsert")).json();
    expect(upserts.items.map((job: Job) => job.id)).toContain(joined.id);
    expect(upserts.items.map((job: Job) => job.id)).not.toContain(done.id);
  });
});

describe("expiry", () => {
  let short: TestServer;
  beforeAll(async () => {
    short = await startTestServer({ testHooks: { syncLifetimeMs: 1_500 } });
  });
  afterAll(() => short.close());

  test("a sync not completed in time expires: nothing deleted, joining or completing it is 409 saying to open a new one", async () => {
    const env = { slug: "default", key: short.key, base: short.base };
    await importAndWait(env.base, "subareas", env.key, subareas(1, 10));
    const sync = await openSync(env);
    await join(env, sync, subareas(1, 5));
    expect(Date.parse(sync.expiresAt) - Date.parse(sync.createdAt)).toBe(1_500);
    await Bun.sleep(Math.max(0, Date.parse(sync.expiresAt) - Date.now()) + 50);
    expect((await syncOf(env, sync)).state).toBe("expired");
    const joined = await postJson(env.base, `subareas?sync=${sync.id}`, env.key, subareas(6, 10));
    expect(joined.status).toBe(409);
    expect((await joined.json()).detail).toBe(
      `Sync ${sync.id} expired at ${sync.expiresAt} (a sync must be completed within 24 hours of opening); nothing was deleted, and it can no longer take imports. Open a new sync with POST /v2/syncs and send the records again.`,
    );
    const completed = await post(env, `syncs/${sync.id}/complete`);
    expect(completed.status).toBe(409);
    expect(await ids(env, "subareas")).toHaveLength(10);
  });
});
