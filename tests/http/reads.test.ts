import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { importAndWait, importBatch, waitForJob } from "../helpers/api";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
});
afterAll(() => server.close());

const get = (base: string, key: string, path: string) => fetch(`${base}/v2/${path}`, { headers: { "api-key": key } });

describe("reading records back", () => {
  test("GET /v2/assets/{id} returns the asset as imported, with updatedAt and lastJobId", async () => {
    const record = asset(1);
    const job = await importAndWait(server.base, "assets", server.key, [record]);
    const response = await get(server.base, server.key, `assets/${record.id}`);
    expect(response.status).toBe(200);
    const body = await response.json();
    expect(body).toEqual({ ...record, updatedAt: expect.any(String), lastJobId: job.id });
  });

  test("optional fields that were not sent stay absent", async () => {
    const minimal = { id: "MIN-1", subAreaId: "north", name: "Minimal", status: "ACT", assetCategoryId: "water", assetTypeId: "pipe", shapeType: "Point" };
    await importAndWait(server.base, "assets", server.key, [minimal]);
    const body = await (await get(server.base, server.key, "assets/MIN-1")).json();
    expect(Object.keys(body).sort()).toEqual([...Object.keys(minimal), "updatedAt", "lastJobId"].sort());
  });

  test("GET /v2/<resource>/{id} is 404 Problem Details for an unknown id", async () => {
    const response = await get(server.base, server.key, "subareas/nope");
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ status: 404, detail: expect.stringContaining("'nope'") });
  });

  test("lists page through every record in id order with a cursor", async () => {
    const env = await server.addEnvironment("paging");
    const ids = Array.from({ length: 25 }, (_, i) => `SA-${String(i).padStart(2, "0")}`);
    await importAndWait(env.base, "subareas", env.key, [...ids].reverse().map((id) => ({ id, name: id })));
    const seen: string[] = [];
    let after = "";
    for (let pageNo = 0; pageNo < 10; pageNo++) {
      const body = await (await get(env.base, env.key, `subareas?limit=10${after ? `&after=${after}` : ""}`)).json();
      seen.push(...body.items.map((item: { id: string }) => item.id));
      if (body.nextCursor === null) break;
      after = body.nextCursor;
    }
    expect(seen).toEqual(ids);
  });

  test.each(["0", "1001", "abc", "-5", "2.5"])("limit=%s is a 400 keyed limit", async (limit) => {
    const response = await get(server.base, server.key, `assets?limit=${limit}`);
    expect(response.status).toBe(400);
    const body = await response.json();
    expect(body.errors.limit[0]).toContain("1 to 1000");
  });

  test("another environment's records are invisible", async () => {
    const other = await server.addEnvironment("reads-other");
    expect((await get(other.base, other.key, `assets/${asset(1).id}`)).status).toBe(404);
    expect((await (await get(other.base, other.key, "assets")).json()).items).toEqual([]);
  });
});

describe("GET /{env}/v2/jobs", () => {
  test("lists the environment's jobs newest first, filtered by status, with a cursor", async () => {
    const env = await server.addEnvironment("job-list");
    const ok = await importAndWait(env.base, "subareas", env.key, [{ id: "a", name: "A" }]);
    const failed = await importAndWait(env.base, "subareas", env.key, [{ id: "b", name: "B" }, { id: "b", name: "B" }]);
    const last = await waitForJob(env.base, env.key, (await importBatch(env.base, "subareas", env.key, [{ id: "c", name: "C" }])).id);

    const all = await (await get(env.base, env.key, "jobs")).json();
    expect(all.items.map((job: { id: number }) => job.id)).toEqual([last.id, failed.id, ok.id]);
    expect(all.nextCursor).toBeNull();

    const onlyFailed = await (await get(env.base, env.key, "jobs?status=Failed")).json();
    expect(onlyFailed.items.map((job: { id: number }) => job.id)).toEqual([failed.id]);

    const first = await (await get(env.base, env.key, "jobs?limit=2")).json();
    expect(first.items).toHaveLength(2);
    const second = await (await get(env.base, env.key, `jobs?limit=2&after=${first.nextCursor}`)).json();
    expect(second.items.map((job: { id: number }) => job.id)).toEqual([ok.id]);
  });

  test("an unknown status filter is a 400 that lists the states", async () => {
    const response = await get(server.base, server.key, "jobs?status=Done");
    expect(response.status).toBe(400);
    expect((await response.json()).errors.status[0]).toContain("Pending, Processing, Succeeded, PartiallySucceeded, Failed");
  });

  test("filtered by type, the importJobType, alone or with status", async () => {
    const env = await server.addEnvironment("job-types");
    const subArea = await importAndWait(env.base, "subareas", env.key, [{ id: "north", name: "North" }]);
    const assetType = await importAndWait(env.base, "assettypes", env.key, [{ id: "pipe", name: "Pipe" }]);
    const badSubArea = await importAndWait(env.base, "subareas", env.key, [{ id: "b", name: "B" }, { id: "b", name: "B" }]);
    const ids = async (query: string) => (await (await get(env.base, env.key, `jobs?${query}`)).json()).items.map((job: { id: number }) => job.id);

    expect(await ids("type=SubArea")).toEqual([badSubArea.id, subArea.id]);
    expect(await ids("type=AssetType")).toEqual([assetType.id]);
    expect(await ids("type=Asset")).toEqual([]);
    expect(await ids("type=SubArea&status=Failed")).toEqual([badSubArea.id]);
    expect(await ids("type=SubArea&limit=1")).toEqual([badSubArea.id]);
    expect(await ids(`type=SubArea&after=${badSubArea.id}`)).toEqual([subArea.id]);
  });

  test.each([
    ["subarea", "You entered 'subarea'."],
    ["", "You sent it empty: give a value, or leave the parameter out."],
  ])("type=%p is a 400 keyed type that lists the types", async (type, youSent) => {
    const response = await get(server.base, server.key, `jobs?type=${type}`);
    expect(response.status).toBe(400);
    expect((await response.json()).errors).toEqual({ type: [`'Type' must be one of: SubArea, AssetType, AssetCategory, Asset. ${youSent}`] });
  });

  test("jobs of another environment are not listed", async () => {
    const other = await server.addEnvironment("jobs-other");
    expect((await (await get(other.base, other.key, "jobs")).json()).items).toEqual([]);
  });
});
