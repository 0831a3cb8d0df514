import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { postJson, waitForJob, type JobDocument } from "../helpers/api";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
});
afterAll(() => server.close());

const post = (key: string, body: unknown, resource = "assets", base = server.base, apiKey = server.key) =>
  postJson(base, resource, apiKey, JSON.stringify(body), { "idempotency-key": key });
const jobCount = async () => Number((await server.query<{ n: number }>("SELECT count(*) AS n FROM jobs"))[0]!.n);

describe("Idempotency-Key on import POSTs", () => {
  test("the same key and body again: 202 with the original job, marked Idempotent-Replayed, and no second job", async () => {
    const body = [asset(1), asset(2)];
    const first = await post("order-1", body);
    expect(first.status).toBe(202);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const job = (await first.json()) as JobDocument;
    await waitForJob(server.base, server.key, job.id);
    const before = (await jobCount());

    const again = await post("order-1", body);
    expect(again.status).toBe(202);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.headers.get("location")).toBe(`/default/v2/status/${job.id}`);
    const replayed = (await again.json()) as JobDocument;
    expect(replayed.id).toBe(job.id);
    // The job as it is now: ended, so nothing to poll again after.
    expect(replayed.importJobStatus).toBe("Succeeded");
    expect([first.headers.get("retry-after"), again.headers.get("retry-after")]).toEqual(["1", null]);
    expect((await jobCount())).toBe(before);
  });

  test("the same key with another body, or for another resource, is a 422 Problem Details and queues nothing", async () => {
    expect((await post("order-2", [asset(3)])).status).toBe(202);
    const before = (await jobCount());
    for (const response of [await post("order-2", [asset(4)]), await post("order-2", [asset(3)], "subareas")]) {
      expect(response.status).toBe(422);
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      expect(await response.json()).toEqual({
        type: "https://tools.ietf.org/html/rfc9110#section-15.5.21",
        title: "Unprocessable Content",
        status: 422,
        detail:
          "This Idempotency-Key was used in the last 24 hours for a different request (another body or resource). Send a new key for a new request, or the same request with this key.",
      });
    }
    expect((await jobCount())).toBe(before);
  });

  test("keys belong to their environment", async () => {
    const other = await server.addEnvironment("idem-other");
    await seedReferenceData(other.base, other.key);
    const here = (await (await post("shared-key", [asset(5)])).json()) as JobDocument;
    const there = await post("shared-key", [asset(5)], "assets", other.base, other.key);
    expect(there.status).toBe(202);
    expect(there.headers.get("idempotent-replayed")).toBeNull();
    expect(((await there.json()) as JobDocument).id).not.toBe(here.id);
  });

  test("ten identical requests at once queue exactly one job", async () => {
    const before = (await jobCount());
    const answers = await Promise.all(Array.from({ length: 10 }, () => post("burst-1", [asset(6), asset(7)])));
    expect(answers.map((answer) => answer.status)).toEqual(Array(10).fill(202));
    const ids = new Set(await Promise.all(answers.map(async (answer) => ((await answer.json()) as JobDocument).id)));
    expect(ids.size).toBe(1);
    expect((await jobCount())).toBe(before + 1);
    expect(answers.filter((answer) => answer.headers.get("idempotent-replayed") === "true")).toHaveLength(9);
  });

  test("a request refused with 400 does not use up its key", async () => {
    expect((await post("order-3", [{ id: "" }])).status).toBe(400);
    const valid = await post("order-3", [asset(8)]);
    expect(valid.status).toBe(202);
    expect(valid.headers.get("idempotent-replayed")).toBeNull();
  });

  test("a malformed key is a 400 naming the header", async () => {
    for (const key of ["", "has space", "x".repeat(256), "tab\there"]) {
      const response = await post(key, [asset(9)]);
      expect(response.status).toBe(400);
      expect((await response.json()).errors).toEqual({
        "Idempotency-Key": ["'Idempotency-Key' must be 1 to 255 visible ASCII characters (no spaces), for example a UUID."],
      });
    }
    expect((await post("x".repeat(255), [asset(9)])).status).toBe(202);
  });

  test("after 24 hours a key is forgotten: it queues a new job, and the purge drops it", async () => {
    const first = (await (await post("order-4", [asset(10)])).json()) as JobDocument;
    const age = (hours: number) => server.query("UPDATE idempotency_keys SET created_at = ? WHERE key = ?", new Date(Date.now() - hours * 3_600_000).toISOString(), "order-4");
    await age(25);
    const second = await post("order-4", [asset(10)]);
    expect(second.status).toBe(202);
    expect(second.headers.get("idempotent-replayed")).toBeNull();
    expect(((await second.json()) as JobDocument).id).not.toBe(first.id);

    await age(25);
    await (await server.store()).queue.purge("2000-01-01T00:00:00.000Z");
    expect(Number((await server.query<{ n: number }>("SELECT count(*) AS n FROM idempotency_keys WHERE key = 'order-4'"))[0]!.n)).toBe(0);
  });
});
