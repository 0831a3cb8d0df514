import { afterAll, beforeAll, expect, test } from "bun:test";
import { importAndWait } from "../helpers/api";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

// What applying did (DECISIONS 7): output.created, updated and unchanged; a record equal to the stored one in
// every field its resource defines (absent equals absent) is unchanged and not written at all.

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
});
afterAll(() => server.close());

const read = async (resource: string, id: string) => (await fetch(`${server.base}/v2/${resource}/${id}`, { headers: { "api-key": server.key } })).json();

test("new records are created; the same again are unchanged and not written; changed ones are updated", async () => {
  const first = await importAndWait(server.base, "assettypes", server.key, [{ id: "t1", name: "One" }, { id: "t2", name: "Two", description: "2" }, { id: "t3", name: "Three" }]);
  expect(first.output).toMatchObject({ applied: 3, created: 3, updated: 0, unchanged: 0 });
  expect(first.output!.message).toBe("All 3 records were applied (3 created, 0 updated, 0 unchanged).");
  const before = await read("assettypes", "t2");

  const again = await importAndWait(server.base, "assettypes", server.key, [{ id: "t1", name: "One" }, { id: "t2", name: "Two", description: "2" }, { id: "t3", name: "Three" }]);
  expect(again.output).toMatchObject({ applied: 3, created: 0, updated: 0, unchanged: 3 });
  expect(await read("assettypes", "t2")).toEqual(before);

  // A description dropped is a change (absent is not "2"); null counts as absent; a new id is created.
  const mixed = await importAndWait(server.base, "assettypes", server.key, [
    { id: "t1", name: "One", description: null },
    { id: "t2", name: "Two" },
    { id: "t4", name: "Four" },
  ]);
  expect(mixed.output).toMatchObject({ applied: 3, created: 1, updated: 1, unchanged: 1 });
  expect(mixed.output!.message).toBe("All 3 records were applied (1 created, 1 updated, 1 unchanged).");
  expect(await read("assettypes", "t2")).toMatchObject({ lastJobId: mixed.id });
  expect(await read("assettypes", "t1")).toMatchObject({ lastJobId: first.id });
});

test("assets: every field counts, nested geolocation and numbers included; rejected records are not in the split", async () => {
  const records = [asset(100), asset(101), asset(102, { geolocation: undefined, startPoint: undefined, endPoint: undefined })];
  const first = await importAndWait(server.base, "assets", server.key, records);
  expect(first.output).toMatchObject({ created: 3, updated: 0, unchanged: 0 });
  const same = await importAndWait(server.base, "assets", server.key, records);
  expect(same.output).toMatchObject({ created: 0, updated: 0, unchanged: 3 });
  expect(await read("assets", "A-0000102")).toMatchObject({ lastJobId: first.id });

  const changed = await importAndWait(server.base, "assets", server.key, [
    asset(100, { geolocation: { ...asset(100).geolocation, locationEnd: 207.5 } }),
    asset(101, { endPoint: 111.25 }),
    asset(102, { geolocation: undefined, startPoint: undefined, endPoint: undefined }),
    asset(103, { subAreaId: "nowhere" }),
  ]);
  expect(changed.importJobStatus).toBe("PartiallySucceeded");
  expect(changed.output).toMatchObject({ applied: 3, rejected: 1, created: 0, updated: 2, unchanged: 1 });
  expect(changed.output!.message).toStartWith("1 of 4 records were rejected and 3 applied (0 created, 2 updated, 1 unchanged).");
});

test("re-importing 20,000 unchanged assets writes none of them and says so", async () => {
  const records = Array.from({ length: 20_000 }, (_, i) => asset(10_000 + i));
  await importAndWait(server.base, "assets", server.key, records);
  const again = await importAndWait(server.base, "assets", server.key, records);
  expect(again.output).toMatchObject({ applied: 20_000, created: 0, updated: 0, unchanged: 20_000 });
  const page = (await (await fetch(`${server.base}/v2/assets?limit=5&after=A-0010000`, { headers: { "api-key": server.key } })).json()) as { items: Array<{ lastJobId: number }> };
  expect(page.items.every((item) => item.lastJobId !== again.id)).toBe(true);
}, 60_000);

test("a batch of many records, new, changed and unchanged mixed through it: each counted, and each stored as sent", async () => {
  const ids = (from: number, count: number) => Array.from({ length: count }, (_, i) => 500 + from + i);
  const first = await importAndWait(server.base, "assets", server.key, ids(0, 70).map((n) => asset(n)));
  expect(first.output).toMatchObject({ applied: 70, created: 70, updated: 0, unchanged: 0 });

  // Every third of the 70 renamed, the rest as they were, then 30 new: 100 records, which the SQLite store
  // upserts 32 to a statement and the last 4 one by one.
  const changedOnes = new Set(ids(0, 70).filter((n) => n % 3 === 0));
  const second = ids(0, 100).map((n) => (changedOnes.has(n) ? asset(n, { name: `Renamed ${n}`, geolocation: undefined }) : asset(n)));
  const job = await importAndWait(server.base, "assets", server.key, second);
  expect(job.output).toMatchObject({ applied: 100, created: 30, updated: changedOnes.size, unchanged: 70 - changedOnes.size });

  for (const record of second) {
    const stored = await read("assets", record.id);
    const n = Number(record.id.slice(2));
    expect(stored).toEqual({ ...JSON.parse(JSON.stringify(record)), updatedAt: expect.any(String), lastJobId: n < 570 && !changedOnes.has(n) ? first.id : job.id });
  }
});
