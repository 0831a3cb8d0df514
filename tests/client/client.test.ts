import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createClient, ImportdConnectionError, ImportdProblem, type JobDocument } from "../../src/client";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

let server: TestServer;
let client: ReturnType<typeof createClient>;
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
  client = createClient({ baseUrl: server.base, apiKey: server.key });
});
afterAll(() => server.close());

const requestsLogged = () => server.logs.filter((entry) => entry.msg === "request").length;

describe("against a running importd", () => {
  test("imports typed records, follows the job to the end, and reads them back", async () => {
    const progress: string[] = [];
    const accepted = await client.importRecords("assets", [asset(1), asset(2)] as never);
    expect(accepted.importJobStatus).toBe("Pending");
    const job = await client.waitForJob(accepted.id, { onProgress: (current) => progress.push(current.importJobStatus) });
    expect(job).toMatchObject({ id: accepted.id, importJobStatus: "Succeeded", output: { applied: 2 } });
    expect(progress.at(-1)).toBe("Succeeded");
    const record = await client.getRecord("assets", asset(1).id as string);
    expect(record).toMatchObject({ id: asset(1).id, lastJobId: accepted.id });
    const page = await client.listRecords("assets", { limit: 1 });
    expect(page.items).toHaveLength(1);
    expect(page.nextCursor).not.toBeNull();
    expect((await client.listJobs({ status: "Succeeded", limit: 100 })).items.map((item) => item.id)).toContain(accepted.id);
  });

  test("a 400 becomes an ImportdProblem that keeps the errors map, after one request", async () => {
    const before = requestsLogged();
    const error = await client.importRecords("assets", [{ ...asset(3), subAreaId: "" }] as never).catch((e) => e);
    expect(error).toBeInstanceOf(ImportdProblem);
    expect(error).toMatchObject({ status: 400, title: "One or more validation errors occurred.", errors: { "[0].subAreaId": ["'Sub Area Id' must not be empty."] } });
    expect(requestsLogged() - before).toBe(1);
  });

  test("a wrong key is a 401 ImportdProblem, never retried", async () => {
    const before = requestsLogged();
    const error = await createClient({ baseUrl: server.base, apiKey: "wrong_1" }).getJob(1).catch((e) => e);
    expect(error).toMatchObject({ name: "ImportdProblem", status: 401 });
    expect(requestsLogged() - before).toBe(1);
  });

  test("the same idempotency key twice is the same job", async () => {
    const first = await client.importRecords("assets", [asset(4)] as never, { idempotencyKey: "client-test-1" });
    const second = await client.importRecords("assets", [asset(4)] as never, { idempotencyKey: "client-test-1" });
    expect(second.id).toBe(first.id);
  });

  test("rejectedRecords walks every page of a job's rejected records", async () => {
    const job = await client.waitForJob((await client.importRecords("assets", Array.from({ length: 1500 }, (_, i) => ({ ...asset(100 + i), subAreaId: "west" })) as never)).id);
    const indexes: number[] = [];
    for await (const rejected of client.rejectedRecords(job.id)) indexes.push(rejected.index);
    expect(indexes).toEqual(Array.from({ length: 1500 }, (_, i) => i));
  });

  test("deleteRecords queues a delete job; listDeletions pages what it deleted, and resumes from resumeCursor", async () => {
    const ids = [asset(900).id as string, asset(901).id as string];
    await client.waitForJob((await client.importRecords("assets", [asset(900), asset(901)] as never)).id);
    const queued = await client.queueDeletion("assets", [ids[0]!, "never-imported"], { idempotencyKey: "client-delete-1" });
    expect(queued).toMatchObject({ replayed: false, job: { operation: "delete", importJobType: "Asset", recordCount: 2 } });
    const again = await client.queueDeletion("assets", [ids[0]!, "never-imported"], { idempotencyKey: "client-delete-1" });
    expect(again).toMatchObject({ replayed: true, job: { id: queued.job.id } });
    const done = await client.waitForJob(queued.job.id);
    expect(done.output).toMatchObject({ applied: 2, rejected: 0, deleted: 1, notFound: 1 });
    expect(done.output).not.toHaveProperty("created");
    const deleted = await client.getRecord("assets", ids[0]!).catch((e) => e);
    expect(deleted).toMatchObject({ name: "ImportdProblem", status: 404 });

    const first = await client.listDeletions("assets", { limit: 100 });
    expect(first.items).toEqual([{ id: ids[0]!, deletedAt: expect.any(String), deletedByJobId: queued.job.id }]);
    expect(first.nextCursor).toBeNull();
    // A dry run deletes nothing; then a second deletion comes after the first page's resumeCursor.
    const dry = await client.waitForJob((await client.deleteRecords("assets", [ids[1]!], { dryRun: true })).id);
    expect(dry).toMatchObject({ dryRun: true, operation: "delete", output: { deleted: 1 } });
    expect(await client.getRecord("assets", ids[1]!)).toMatchObject({ id: ids[1] });
    const second = await client.waitForJob((await client.deleteRecords("assets", [ids[1]!])).id);
    const since = await client.listDeletions("assets", { after: first.resumeCursor });
    expect(since.items.map((item) => [item.id, item.deletedByJobId])).toEqual([[ids[1]!, second.id]]);
    expect((await client.listJobs({ operation: "delete", limit: 100 })).items.map((job) => job.id)).toEqual([second.id, dry.id, queued.job.id]);
  });

  test("openSync, importRecords with sync, completeSync and getSync mirror a resource: a dry run deletes nothing, a guard stops the real one, a raised limit lets it through", async () => {
    const kept = [asset(950), asset(951)];
    const gone = asset(952);
    await client.waitForJob((await client.importRecords("assets", [...kept, gone] as never)).id);
    const sync = await client.openSync("assets");
    expect(sync).toMatchObject({ resource: "assets", state: "open", jobs: [], lastCompletion: null, completedAt: null });
    const imported = await client.waitForJob((await client.importRecords("assets", kept as never, { sync: sync.id })).id);
    // A dry-run import joins the sync too: what it sent counts as sent for a dry-run completion only.
    const dryImport = await client.waitForJob((await client.importRecords("assets", [gone] as never, { sync: sync.id, dryRun: true })).id);
    expect(dryImport.dryRun).toBe(true);

    // The file's other tests left assets of their own, which the sync did not send either: the dry run would delete
    // those, and a real completion those and `gone`, which only a dry run sent.
    const dry = await client.waitForJob((await client.completeSync(sync.id, { dryRun: true, maxDeletePercent: 100 })).id);
    const unsent = dry.output!.total + 1;
    expect(dry).toMatchObject({ operation: "syncCompletion", dryRun: true, output: { deleted: unsent - 1 } });
    expect(await client.getRecord("assets", gone.id as string)).toMatchObject({ id: gone.id });

    const guarded = await client.waitForJob((await client.completeSync(sync.id, { maxDelete: 0 })).id);
    expect(guarded).toMatchObject({ importJobStatus: "Failed", output: { deleted: 0 } });
    expect(guarded.output!.message).toContain(`(or ?maxDelete=${unsent})`);

    const completion = await client.waitForJob((await client.completeSync(sync.id, { maxDeletePercent: 100 })).id);
    expect(completion).toMatchObject({ operation: "syncCompletion", importJobStatus: "Succeeded", output: { deleted: unsent, rejected: 0, total: unsent } });
    expect(await client.getRecord("assets", gone.id as string).catch((e) => e)).toMatchObject({ status: 404 });
    expect(await client.getRecord("assets", kept[0]!.id as string)).toMatchObject({ id: kept[0]!.id });
    const ended = await client.getSync(sync.id);
    expect(ended).toMatchObject({ state: "completed", completedByJobId: completion.id, lastCompletion: { id: completion.id } });
    expect(ended.jobs.map((job) => [job.id, job.operation, job.dryRun])).toEqual([
      [imported.id, "upsert", false],
      [dryImport.id, "upsert", true],
      [dry.id, "syncCompletion", true],
      [guarded.id, "syncCompletion", false],
      [completion.id, "syncCompletion", false],
    ]);
    // An ended sync takes no more imports: 409.
    expect(await client.importRecords("assets", kept as never, { sync: sync.id }).catch((e) => e)).toMatchObject({ name: "ImportdProblem", status: 409 });
    expect(await client.getSync(999_999).catch((e) => e)).toMatchObject({ status: 404 });
  });

  test("waitForJob's polls are held by the server until the job ends (Prefer: wait), and it stops when its signal aborts", async () => {
    const parked = await server.parkJob("default", "until released");
    const polls: number[] = [];
    const error = await client.waitForJob(parked.id, { signal: AbortSignal.timeout(1500), onProgress: () => polls.push(performance.now()) }).catch((e) => e);
    expect(error.name).toBe("TimeoutError");
    // One poll, held: no answer came while the job waited.
    expect(polls).toHaveLength(0);
    await parked.release();
  });
});

describe("retries", () => {
  /** A stand-in server that answers from a script and remembers what it was sent. */
  function stub(answers: Array<() => Response>) {
    // Headers are copied at once: Bun reuses a request's headers once its answer has gone.
    const seen: Array<{ headers: Headers }> = [];
    const stubServer = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: (request) => {
        seen.push({ headers: new Headers(request.headers) });
        return answers[Math.min(seen.length - 1, answers.length - 1)]!();
      },
    });
    return { seen, url: `http://127.0.0.1:${stubServer.port}/default`, stop: () => stubServer.stop(true) };
  }
  const job = { id: 7, importJobStatus: "Pending" } as JobDocument;

  test("a 5xx is retried, honouring Retry-After, with the same Idempotency-Key each time", async () => {
    const s = stub([
      () => new Response("busy", { status: 503, headers: { "retry-after": "0" } }),
      () => new Response("oops", { status: 500 }),
      () => Response.json(job, { status: 202 }),
    ]);
    try {
      const answer = await createClient({ baseUrl: s.url, apiKey: "k_1", backoffMs: 10 }).importRecords("subareas", [{ id: "a", name: "A" }]);
      expect(answer.id).toBe(7);
      expect(s.seen).toHaveLength(3);
      const keys = new Set(s.seen.map((request) => request.headers.get("idempotency-key")));
      expect(keys.size).toBe(1);
      expect([...keys][0]).toMatch(/^[0-9a-f-]{36}$/);
    } finally {
      s.stop();
    }
  });

  test("waitForJob asks for a long poll, and against a server that does not hold polls waits as Retry-After says", async () => {
    const s = stub([
      () => Response.json(job, { headers: { "retry-after": "1" } }),
      () => Response.json({ ...job, importJobStatus: "Succeeded" }),
    ]);
    try {
      const started = performance.now();
      const done = await createClient({ baseUrl: s.url, apiKey: "k_1" }).waitForJob(7);
      expect(done.importJobStatus).toBe("Succeeded");
      expect(s.seen.map((request) => request.headers.get("prefer"))).toEqual(["wait=10", "wait=10"]);
      expect(performance.now() - started).toBeGreaterThanOrEqual(950);
    } finally {
      s.stop();
    }
  });

  test("a 4xx is never retried, 429 included", async () => {
    const s = stub([() => Response.json({ title: "Too Many Requests", status: 429 }, { status: 429, headers: { "retry-after": "30" } })]);
    try {
      const error = await createClient({ baseUrl: s.url, apiKey: "k_1", backoffMs: 10 }).getJob(7).catch((e) => e);
      expect(error).toMatchObject({ status: 429, title: "Too Many Requests" });
      expect(s.seen).toHaveLength(1);
    } finally {
      s.stop();
    }
  });

  test("5xx until the retries run out ends in the last answer as an ImportdProblem", async () => {
    const s = stub([() => Response.json({ title: "Service Unavailable", status: 503, detail: "later" }, { status: 503 })]);
    try {
      const error = await createClient({ baseUrl: s.url, apiKey: "k_1", retries: 2, backoffMs: 5 }).getJob(7).catch((e) => e);
      expect(error).toMatchObject({ status: 503, detail: "later" });
      expect(s.seen).toHaveLength(3);
    } finally {
      s.stop();
    }
  });

  test("network errors are retried until the server is there, then give up with ImportdConnectionError", async () => {
    const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
    const port = probe.port;
    probe.stop(true);
    const baseUrl = `http://127.0.0.1:${port}/default`;

    const late = setTimeout(() => {
      laterServer = Bun.serve({ port, hostname: "127.0.0.1", fetch: () => Response.json(job) });
    }, 300);
    let laterServer: ReturnType<typeof Bun.serve> | undefined;
    try {
      expect((await createClient({ baseUrl, apiKey: "k_1", retries: 8, backoffMs: 100 }).getJob(7)).id).toBe(7);
    } finally {
      clearTimeout(late);
      laterServer?.stop(true);
    }
    const error = await createClient({ baseUrl, apiKey: "k_1", retries: 1, backoffMs: 5 }).getJob(7).catch((e) => e);
    expect(error).toBeInstanceOf(ImportdConnectionError);
    expect(error.message).toContain(`cannot reach importd at ${baseUrl}`);
  });
});
