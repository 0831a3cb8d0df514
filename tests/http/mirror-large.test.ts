import { afterAll, beforeAll, expect, test } from "bun:test";
import { importBatch, postJson, waitForJob } from "../helpers/api";
import { startTestServer, type TestServer } from "../helpers/server";

// The check of the mirror at scale: a mirror of a 100k-row source that drops 5% of the rows. The dry run's
// count is exact; the completion deletes exactly those rows (their tombstones say so); a second mirror of the same
// source deletes nothing. MIRROR_ROWS scales it (the default is the 100,000).

const rows = Number(process.env.MIRROR_ROWS ?? 100_000);
const chunks = 4;

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

const subarea = (n: number) => ({ id: `SA-${String(n).padStart(7, "0")}`, name: `Sub area ${n}` });
const all = Array.from({ length: rows }, (_, n) => subarea(n));
// Every twentieth row is gone from the source: 5%.
const dropped = all.filter((_, n) => n % 20 === 7);
const source = all.filter((_, n) => n % 20 !== 7);

async function sendInChunks(records: typeof all, query = "") {
  const size = Math.ceil(records.length / chunks);
  for (let start = 0; start < records.length; start += size) {
    const job = await importBatch(server.base, `subareas${query}`, server.key, records.slice(start, start + size));
    expect((await waitForJob(server.base, server.key, job.id, 300_000)).importJobStatus).toBe("Succeeded");
  }
}
async function openSync(): Promise<number> {
  const response = await postJson(server.base, "syncs", server.key, { resource: "subareas" });
  expect(response.status).toBe(201);
  return (await response.json()).id;
}
async function complete(id: number, query = "") {
  const response = await postJson(server.base, `syncs/${id}/complete${query}`, server.key, "");
  expect(response.status).toBe(202);
  return waitForJob(server.base, server.key, (await response.json()).id, 300_000);
}

test(`a mirror of ${rows.toLocaleString("en-US")} rows that drops 5%: the dry run's count is exact, the completion deletes exactly those rows, a second mirror deletes nothing`, async () => {
  await sendInChunks(all);
  const sync = await openSync();
  await sendInChunks(source, `?sync=${sync}`);
  const sent = await (await fetch(`${server.base}/v2/syncs/${sync}`, { headers: { "api-key": server.key } })).json();
  expect(sent.recordsSent).toBe(source.length);

  // 5% is within the default 10%.
  const dryRun = await complete(sync, "?dryRun=true");
  expect(dryRun).toMatchObject({ importJobStatus: "Succeeded", output: { total: dropped.length, deleted: dropped.length, rejected: 0 } });
  const first = await (await fetch(`${server.base}/v2/subareas/${dropped[0]!.id}`, { headers: { "api-key": server.key } })).json();
  expect(first.id).toBe(dropped[0]!.id);

  const done = await complete(sync);
  expect(done).toMatchObject({ importJobStatus: "Succeeded", output: { total: dropped.length, deleted: dropped.length, rejected: 0 } });
  // Exactly the dropped rows: their tombstones, page by page, by this completion.
  const deleted: string[] = [];
  let after: string | null = "0";
  while (after !== null) {
    const page: { items: Array<{ id: string; deletedByJobId: number }>; nextCursor: string | null } = await (await fetch(`${server.base}/v2/deletions/subareas?limit=1000&after=${after}`, { headers: { "api-key": server.key } })).json();
    for (const item of page.items) {
      expect(item.deletedByJobId).toBe(done.id);
      deleted.push(item.id);
    }
    after = page.nextCursor;
  }
  expect(deleted.sort()).toEqual(dropped.map((record) => record.id));

  const again = await openSync();
  await sendInChunks(source, `?sync=${again}`);
  const nothing = await complete(again);
  expect(nothing).toMatchObject({ importJobStatus: "Succeeded", output: { total: 0, deleted: 0, rejected: 0 } });
}, 600_000);
