import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { importAndWait } from "../helpers/api";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
});
afterAll(() => server.close());

const status = (base: string, key: string, id: number | string) => fetch(`${base}/v2/status/${id}`, { headers: { "api-key": key } });

describe("GET /{env}/v2/status/{id}", () => {
  test("200 with the job document of a finished job, without Retry-After", async () => {
    const job = await importAndWait(server.base, "assets", server.key, [asset(1)]);
    const response = await status(server.base, server.key, job.id);
    expect(response.status).toBe(200);
    expect(response.headers.get("retry-after")).toBeNull();
    expect(await response.json()).toEqual(job);
  });

  test("a Pending job carries Retry-After and null startedAt/completedAt/output", async () => {
    const env = await server.addEnvironment("parked-pending");
    const job = await server.parkJob(env.slug);
    const response = await status(env.base, env.key, job.id);
    expect(response.status).toBe(200);
    expect(Number(response.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await response.json()).toMatchObject({ importJobStatus: "Pending", output: null, startedAt: null, completedAt: null, recordCount: 1 });
  });

  test("a Processing job carries Retry-After and its startedAt", async () => {
    const env = await server.addEnvironment("parked-processing");
    const job = await server.parkJob(env.slug);
    await server.query("UPDATE jobs SET status = 'Processing', started_at = ? WHERE id = ?", new Date().toISOString(), job.id);
    const response = await status(env.base, env.key, job.id);
    expect(response.headers.get("retry-after")).not.toBeNull();
    const body = await response.json();
    expect(body.importJobStatus).toBe("Processing");
    expect(body.startedAt).not.toBeNull();
    expect(body.output).toBeNull();
  });

  test("a job polled again after it changed is answered as it is now, as application/json, not as it was first sent", async () => {
    const env = await server.addEnvironment("polled-twice");
    const job = await server.parkJob(env.slug);
    const before = await status(env.base, env.key, job.id);
    expect(before.headers.get("content-type")).toBe("application/json;charset=utf-8");
    expect((await before.json()).importJobStatus).toBe("Pending");
    // The same poll again, nothing committed in between: the same document.
    expect((await (await status(env.base, env.key, job.id)).json()).importJobStatus).toBe("Pending");
    await server.query("UPDATE jobs SET status = 'Processing', started_at = ? WHERE id = ?", new Date().toISOString(), job.id);
    const after = await status(env.base, env.key, job.id);
    expect(after.headers.get("content-type")).toBe("application/json;charset=utf-8");
    expect(after.headers.get("retry-after")).not.toBeNull();
    expect(await after.json()).toMatchObject({ id: job.id, importJobStatus: "Processing", output: null });
  });

  test("404 Problem Details for an unknown job id", async () => {
    const response = await status(server.base, server.key, 987654);
    expect(response.status).toBe(404);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect(await response.json()).toMatchObject({ status: 404, title: "Not Found" });
  });

  test.each(["abc", "0", "-1", "1.5", "99999999999999999999", "%2e%2e"])("404 for the malformed job id %s", async (id) => {
    expect((await status(server.base, server.key, id)).status).toBe(404);
  });

  test("another environment's job is a 404 that looks exactly like an unknown id", async () => {
    const mine = await importAndWait(server.base, "subareas", server.key, [{ id: "x", name: "X" }]);
    const other = await server.addEnvironment("status-other");
    const foreign = await status(other.base, other.key, mine.id);
    const unknown = await status(other.base, other.key, 987655);
    expect(foreign.status).toBe(404);
    expect(await foreign.text()).toBe(await unknown.text());
  });

  test("a job document past its retention is gone (404)", async () => {
    const job = await importAndWait(server.base, "subareas", server.key, [{ id: "old", name: "Old" }]);
    await server.query("UPDATE jobs SET completed_at = '2000-01-01T00:00:00.000Z' WHERE id = ?", job.id);
    expect((await status(server.base, server.key, job.id)).status).toBe(404);
  });
});
