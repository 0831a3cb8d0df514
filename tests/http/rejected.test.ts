import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { importAndWait, waitForJob } from "../helpers/api";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
});
afterAll(() => server.close());

const pick = <T extends object, K extends keyof T>(record: T, ...keys: K[]) => Object.fromEntries(keys.map((key) => [key, record[key]])) as Pick<T, K>;

type RejectedPage = { items: Array<{ index: number; id: string | null; field: string; message: string; record: Record<string, unknown> }>; nextCursor: string | null };
const rejected = (id: number | string, query = "", key = server.key, base = server.base) =>
  fetch(`${base}/v2/status/${id}/rejected${query}`, { headers: { "api-key": key } });
const rejectedPage = async (id: number, query = "") => {
  const response = await rejected(id, query);
  expect(response.status).toBe(200);
  return (await response.json()) as RejectedPage;
};

describe("GET /{env}/v2/status/{id}/rejected", () => {
  test("lists exactly the records a PartiallySucceeded job rejected, as they were sent, with index, field and reason", async () => {
    const records = [asset(1), asset(2, { subAreaId: "west", description: "keep me" }), asset(3), asset(4, { assetTypeId: "hydrant" })];
    const job = await importAndWait(server.base, "assets", server.key, records);
    expect(job.importJobStatus).toBe("PartiallySucceeded");
    const page = await rejectedPage(job.id);
    expect(page).toEqual({
      items: [
        { index: 1, id: records[1]!.id as string, field: "subAreaId", message: job.output!.errors[0]!.message, record: records[1]! },
        { index: 3, id: records[3]!.id as string, field: "assetTypeId", message: job.output!.errors[1]!.message, record: records[3]! },
      ],
      nextCursor: null,
    });
  });

  test("keeps a rejected record exactly as sent: unknown fields, nested ones, nulls and the order of its keys", async () => {
    const odd = { name: "odd", colour: "red", id: "ODD-1", subAreaId: "west", description: null, tags: ["a", { deep: null }], ...pick(asset(5), "status", "assetCategoryId", "assetTypeId", "shapeType"), geolocation: { ...asset(5).geolocation, srid: 4326, note: null } };
    const job = await importAndWait(server.base, "assets", server.key, [asset(5), odd]);
    expect(job.importJobStatus).toBe("PartiallySucceeded");
    const response = await rejected(job.id);
    const text = await response.text();
    // The text itself: the record's keys in the order they came, not the schema's.
    expect(text).toContain(`"record":${JSON.stringify(odd)}`);
    expect(JSON.parse(text).items).toMatchObject([{ index: 1, id: "ODD-1", field: "subAreaId", record: odd }]);
  });

  test("is empty for a job that applied everything", async () => {
    const job = await importAndWait(server.base, "assets", server.key, [asset(10)]);
    expect(await rejectedPage(job.id)).toEqual({ items: [], nextCursor: null });
  });

  test("lists every record of a batch that failed as a whole: the duplicates with their own reason, the others with the batch's", async () => {
    const records = [asset(20), asset(21), asset(20, { name: "again" })];
    const job = await importAndWait(server.base, "assets", server.key, records);
    expect(job.importJobStatus).toBe("Failed");
    const { items } = await rejectedPage(job.id);
    expect(items.map(({ index, field }) => [index, field])).toEqual([[0, "id"], [1, "$"], [2, "id"]]);
    expect(items[1]!.message).toBe(job.output!.message);
    expect(items.map((item) => item.record)).toEqual(records);
  });

  test("pages in batch order with limit and after, and the records can be fixed and sent again", async () => {
    const records = Array.from({ length: 250 }, (_, i) => asset(100 + i, { subAreaId: "nowhere" }));
    const job = await importAndWait(server.base, "assets", server.key, records);
    expect(job.output).toMatchObject({ rejected: 250, applied: 0 });
    const seen: RejectedPage["items"] = [];
    let cursor: string | null = null;
    do {
      const page: RejectedPage = await rejectedPage(job.id, `?limit=100${cursor === null ? "" : `&after=${cursor}`}`);
      expect(page.items.length).toBeLessThanOrEqual(100);
      seen.push(...page.items);
      cursor = page.nextCursor;
    } while (cursor !== null);
    expect(seen.map((item) => item.index)).toEqual(records.map((_, i) => i));

    const fixed = seen.map((item) => ({ ...item.record, subAreaId: "north" }));
    const again = await importAndWait(server.base, "assets", server.key, fixed);
    expect(again.importJobStatus).toBe("Succeeded");
    expect(again.output!.applied).toBe(250);
  });

  test("409 with Retry-After while the job has not finished", async () => {
    const parked = await server.parkJob("default");
    const response = await rejected(parked.id);
    expect(response.status).toBe(409);
    expect(Number(response.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect((await response.json()).detail).toBe("The job is still Pending: which records it rejects is known once it has finished. Poll its statusUrl, then ask again.");
  });

  test("a bad query is a 400 whatever the job's state, checked before the job is: Pending, finished, unknown or another environment's alike", async () => {
    const parked = await server.parkJob("default");
    const answers = async (id: number) =>
      Promise.all(["?limit=0", "?after=-1", "?limit=1&limit=2"].map(async (query) => {
        const response = await rejected(id, query);
        return { query, status: response.status, keys: Object.keys(((await response.json()) as { errors?: object }).errors ?? {}) };
      }));
    const expected = [{ query: "?limit=0", status: 400, keys: ["limit"] }, { query: "?after=-1", status: 400, keys: ["after"] }, { query: "?limit=1&limit=2", status: 400, keys: ["limit"] }];
    // Pending: it used to be a 409 now and a 400 once the job had ended.
    expect((await rejected(parked.id)).status).toBe(409);
    expect(await answers(parked.id)).toEqual(expected);
    expect(await answers(999_999)).toEqual(expected);
    const other = await server.addEnvironment("rejected-validate-first");
    expect(await answers((await importAndWait(other.base, "subareas", other.key, [{ id: "x", name: "X" }])).id)).toEqual(expected);
    await importAndWait(server.base, "subareas", server.key, [{ id: "wakes-the-queue", name: "Wakes the queue" }]);
    await waitForJob(server.base, server.key, parked.id);
    expect(await answers(parked.id)).toEqual(expected);
  });

  test("404 for an unknown job and for another environment's; 400 for a bad cursor; 401 without a key", async () => {
    const job = await importAndWait(server.base, "assets", server.key, [asset(30, { subAreaId: "west" })]);
    expect((await rejected(999_999)).status).toBe(404);
    expect((await rejected("abc")).status).toBe(404);
    const other = await server.addEnvironment("rejected-other");
    expect((await rejected(job.id, "", other.key, other.base)).status).toBe(404);
    const bad = await rejected(job.id, "?after=-1");
    expect(bad.status).toBe(400);
    expect((await bad.json()).errors).toEqual({ after: ["'After' must be a record index (a whole number from 0). You entered '-1'."] });
    expect((await fetch(`${server.base}/v2/status/${job.id}/rejected`)).status).toBe(401);
  });

  test("the rejected records go when the job document is purged", async () => {
    const job = await importAndWait(server.base, "assets", server.key, [asset(40, { subAreaId: "west" })]);
    const count = async () => Number((await server.query<{ n: number }>("SELECT count(*) AS n FROM job_rejections WHERE job_id = ?", job.id))[0]!.n);
    expect(await count()).toBe(1);
    await (await server.store()).queue.purge(new Date(Date.now() + 60_000).toISOString());
    expect(await count()).toBe(0);
    expect((await rejected(job.id)).status).toBe(404);
  });
});
