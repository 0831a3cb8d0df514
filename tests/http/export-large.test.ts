import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, rmSync } from "node:fs";
import { importAndWait } from "../helpers/api";
import { asShipped, spawnServer, type ServerProcess } from "../helpers/process";
import { asset, seedReferenceData } from "../helpers/records";
import { tempDir } from "../helpers/server";

// An export's memory stays flat whatever its size (DECISIONS 14), and status polls stay fast while it streams: the
// server in a process of its own, its resident memory read from /proc while the test reads the export to the end.
// 200,000 assets (about 110 MB of NDJSON) on every landing; `npm run export:long` exports 2 million (EXPORT_RECORDS).
const records = Number(process.env.EXPORT_RECORDS ?? 200_000);
/** What the server may grow by while it exports, whatever the number of records: a few slices and the sockets' buffers. */
const maxGrowthBytes = 96 * 1024 * 1024;
const recordsPerJob = 20_000;

const dir = tempDir("importd-export-large-");
let server: ServerProcess;
let base: string;
let key: string;

const residentBytes = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${server.proc.pid}/status`, "utf8"))![1]) * 1024;

beforeAll(async () => {
  server = await spawnServer(dir, [], 30_000, asShipped);
  base = `${server.url}/default`;
  key = server.firstRunKey!;
  await seedReferenceData(base, key);
  for (let from = 0; from < records; from += recordsPerJob) {
    const job = await importAndWait(base, "assets", key, Array.from({ length: Math.min(recordsPerJob, records - from) }, (_, i) => asset(from + i)));
    if (job.importJobStatus !== "Succeeded") throw new Error(`seeding assets: ${job.output?.message}`);
  }
}, 3_600_000);

afterAll(async () => {
  server.proc.kill();
  await server.proc.exited;
  rmSync(dir, { recursive: true, force: true });
});

test(`exports ${records.toLocaleString("en-US")} assets in id order with the server's memory flat, status polls fast meanwhile`, async () => {
  // Settled: what importing left is the baseline.
  await Bun.sleep(1_000);
  const before = residentBytes();
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, residentBytes())), 50);
  let slowestPollMs = 0;
  let polls = 0;
  let exporting = true;
  const polling = (async () => {
    while (exporting) {
      const started = performance.now();
      const response = await fetch(`${base}/v2/status/1`, { headers: { "api-key": key } });
      await response.arrayBuffer();
      expect(response.status).toBe(200);
      slowestPollMs = Math.max(slowestPollMs, performance.now() - started);
      polls++;
      await Bun.sleep(100);
    }
  })();
  try {
    const response = await fetch(`${base}/v2/exports/assets`, { headers: { "api-key": key } });
    expect(response.status).toBe(200);
    const decoder = new TextDecoder();
    let partial = "";
    let count = 0;
    let previous = "";
    let outOfOrder = 0;
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      const lines = (partial + decoder.decode(chunk, { stream: true })).split("\n");
      partial = lines.pop()!;
      for (const line of lines) {
        // The id is the first member: no need to parse 2 million lines whole.
        const id = line.slice(7, line.indexOf('"', 7));
        if (id <= previous) outOfOrder++;
        previous = id;
        count++;
      }
    }
    expect(partial).toBe("");
    expect(count).toBe(records);
    expect(outOfOrder).toBe(0);
    expect(previous).toBe(asset(records - 1).id);
  } finally {
    exporting = false;
    clearInterval(sampler);
    await polling;
  }
  const growth = peak - before;
  console.log(`export of ${records} assets: server RSS ${Math.round(before / 1e6)} MB before, peak ${Math.round(peak / 1e6)} MB (+${Math.round(growth / 1e6)} MB); ${polls} status polls, slowest ${Math.round(slowestPollMs)} ms`);
  expect(growth).toBeLessThan(maxGrowthBytes);
  expect(polls).toBeGreaterThan(0);
  expect(slowestPollMs).toBeLessThan(1_000);
}, 3_600_000);
