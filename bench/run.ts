// The benchmark suite: `npm run bench` (full) or `npm run bench -- --quick`. Measures importd as its users feel it,
// each figure next to a baseline measured in the same run, prints one table and writes bench/results.json.
// Rows and targets: docs/performance.md.
import { spawn } from "bun";
import { cpus, freemem, release, totalmem } from "node:os";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { asset, assetsBody, assetsBodyOfSize } from "./lib/data";
import { backendsCpuMs, postgresAvailable, stopPostgres, withFreshDatabase, withInstances } from "./lib/postgres";
import { importAndTime, importAndWait, jobClient, startBenchServer, type BenchServer, type ImportPhases, type JobClient } from "./lib/server";
import { cpuMsOf, median, peakRssOf, percentile, threadCpuMsOf } from "./lib/stats";
import { holdPolls, parkJob, waitHeld } from "./lib/held-polls";
import { runtimeEnv } from "./lib/runtime";
import { buildImportd } from "../tests/binary-for-tests";
import { spawnServer } from "../tests/helpers/process";

const quick = process.argv.includes("--quick");
const only = process.argv.find((arg) => arg.startsWith("--only="))?.slice("--only=".length).split(",");
const repeats = quick ? 1 : 3;
const bun = process.execPath;
const here = import.meta.dir;
const work = mkdtempSync(join(tmpdir(), "importd-bench-data-"));
const maxBodyBytes = 100 * 1024 * 1024;

type Row = {
  row: string;
  what: string;
  importd: number;
  baseline: number;
  unit: string;
  /** importd ÷ baseline, or for throughput rows importd ÷ baseline as well (higher is better there). */
  ratio: number;
  /** A row of alternated runs: how many pairs, and the lowest and highest pair ratio. */
  pairs?: { count: number; lowest: number; highest: number };
  target: string;
  /** null: a row shown beside another for comparison, with no target. */
  ok: boolean | null;
  details?: Record<string, unknown>;
};
const rows: Row[] = [];

const log = (line: string) => console.error(`[bench] ${line}`);
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

function writeBody(name: string, body: Uint8Array): string {
  const file = join(work, name);
  writeFileSync(file, body);
  return file;
}

/** Runs a Bun script to its end and parses the JSON line it prints. */
async function runScript<T>(script: string, args: Array<string | number>): Promise<T> {
  const proc = spawn([bun, join(here, script), ...args.map(String)], { env: runtimeEnv, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`${script} exited ${code}: ${stderr}`);
  return JSON.parse(stdout.trim().split("\n").pop()!) as T;
}

/** One run of the plain script (or, `durable`, of the durable floor) on these bytes, into a fresh database: its times and peak RSS. */
async function plainRun(bodyFile: string, kind: "plain" | "durable" = "plain"): Promise<{ emptyMs: number; updateMs: number; peakRssBytes: number }> {
  const dir = mkdtempSync(join(work, "plain-"));
  try {
    return await runScript("baselines/plain-import.ts", [bodyFile, dir, kind]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The plain script's times (and peak RSS) on these bytes, medians over `repeats` fresh databases. */
async function plainBaseline(bodyFile: string) {
  const runs: Array<{ emptyMs: number; updateMs: number; peakRssBytes: number }> = [];
  for (let i = 0; i < repeats; i++) runs.push(await plainRun(bodyFile));
  return { emptyMs: median(runs.map((r) => r.emptyMs)), updateMs: median(runs.map((r) => r.updateMs)), peakRssBytes: median(runs.map((r) => r.peakRssBytes)) };
}

async function withServer<T>(fn: (server: BenchServer) => Promise<T>, args: string[] = []): Promise<T> {
  const server = await startBenchServer(args);
  try {
    return await fn(server);
  } finally {
    await server.stop();
  }
}

const records100k = 100_000;
const file100k = writeBody("assets-100k.json", assetsBody(records100k));
// Issue 45: a ratio row is judged on at least 5 pairs, each an importd run and a baseline run one after the other,
// so that a slow minute weighs on both sides of a pair. --quick is a look, not a verdict.
const pairs = quick ? 1 : 5;

/** A ratio row's target: importd ÷ baseline against `ratio`, and a condition besides, if any, with whether it held. */
type Target = { bound: "≤" | "<" | "≥"; ratio: number; and?: { text: string; met: boolean } };
const atMost = (ratio: number, and?: Target["and"]): Target => ({ bound: "≤", ratio, and });
const atLeast = (ratio: number): Target => ({ bound: "≥", ratio });
const met = (target: Target, ratio: number) =>
  (target.bound === "≤" ? ratio <= target.ratio : target.bound === "<" ? ratio < target.ratio : ratio >= target.ratio) && (target.and?.met ?? true);

/**
 * Every ratio row of alternated runs is decided here (issue 45). Run i of importd's is paired with run i of the
 * baseline's; the row's ratio is the median of the pair ratios, not the ratio of the medians, since a pair shares its
 * minute of the machine and two medians may come from different minutes. The table gives the lowest and highest pair
 * beside it, and each side's median. `target` null: a row shown for comparison only.
 */
function pairedRow(row: string, what: string, unit: string, runs: number[], baselineRuns: number[], target: Target | null, details: Record<string, unknown> = {}): void {
  if (runs.length !== baselineRuns.length || runs.length === 0) throw new Error(`row ${row}: ${runs.length} runs against ${baselineRuns.length}`);
  const pairRatios = runs.map((run, i) => run / baselineRuns[i]!);
  const ratio = median(pairRatios);
  rows.push({
    row,
    what,
    importd: median(runs),
    baseline: median(baselineRuns),
    unit,
    ratio,
    pairs: { count: pairRatios.length, lowest: Math.min(...pairRatios), highest: Math.max(...pairRatios) },
    target: target ? `${target.bound} ${target.ratio}×${target.and ? ` and ${target.and.text}` : ""}` : "none",
    ok: target ? met(target, ratio) : null,
    details: { runs, baselineRuns, pairRatios, ...details },
  });
}

/** A count every run of importd's must have come to, as a row's condition besides its ratio. */
const everyRun = (name: string, counts: number[], expected: number): Target["and"] => ({ text: `${name} = ${expected}`, met: counts.every((count) => count === expected) });

/** The output of the newest job of the bench server's environment: what the run just timed came to. */
async function latestOutput(server: BenchServer): Promise<{ unchanged?: number; deleted?: number }> {
  const latest = (await (await fetch(`${server.base}/v2/jobs?limit=1`, { headers: { "api-key": server.key } })).json()) as { items: Array<{ output: { unchanged?: number; deleted?: number } }> };
  return latest.items[0]!.output;
}

async function endToEnd() {
  const base = { empty: [] as number[], update: [] as number[] };
  const floor = { empty: [] as number[], update: [] as number[] };
  const empty: number[] = [];
  const update: number[] = [];
  const unchanged: number[] = [];
  for (let i = 0; i < pairs; i++) {
    const plain = await plainRun(file100k);
    base.empty.push(plain.emptyMs);
    base.update.push(plain.updateMs);
    const durable = await plainRun(file100k, "durable");
    floor.empty.push(durable.emptyMs);
    floor.update.push(durable.updateMs);
    await withServer(async (server) => {
      // From the file the baselines read (see "How it measures").
      empty.push(await importAndWait(server, "assets", Bun.file(file100k)));
      // The same bytes again: every record equals the stored one, so none is written (DECISIONS 7).
      update.push(await importAndWait(server, "assets", Bun.file(file100k)));
      unchanged.push((await latestOutput(server)).unchanged ?? 0);
    });
  }
  pairedRow("1a", "100k assets, one request, empty table: POST → Succeeded", "ms", empty, base.empty, atMost(1.4));
  pairedRow("1b", "100k assets, one request, the same again (all unchanged): POST → Succeeded", "ms", update, base.update, atMost(1.4));
  // Issue 34: the same against the durable floor (the plain script, plus the payload compressed beside parsing and
  // committed with synchronous = FULL before the upsert: what any asynchronous service must do before its 202).
  pairedRow("1a floor", "row 1a against the durable floor", "ms", empty, floor.empty, atMost(1.3));
  pairedRow("1b floor", "row 1b against the durable floor", "ms", update, floor.update, atMost(1.3));
  // Re-importing what is already there is cheaper than the first import: unchanged records are not written.
  const reimport = { bound: "<", ratio: 1, and: everyRun("unchanged", unchanged, records100k) } as const;
  pairedRow("1c", `100k assets re-imported unchanged (job says unchanged: ${Math.min(...unchanged)}) vs their first import, same server`, "ms", update, empty, reimport, { unchanged });
}

async function fiveRequests() {
  const parts = Array.from({ length: 5 }, (_, i) => assetsBody(20_000, i * 20_000));
  const times: number[] = [];
  const baseTimes: number[] = [];
  const floorTimes: number[] = [];
  for (let i = 0; i < pairs; i++) {
    baseTimes.push((await plainRun(file100k)).emptyMs);
    floorTimes.push((await plainRun(file100k, "durable")).emptyMs);
    await withServer(async (server) => {
      const start = performance.now();
      const ids: number[] = [];
      for (const part of parts) ids.push((await server.post("assets", part)).id);
      for (const id of ids) await server.waitSucceeded(id);
      times.push(performance.now() - start);
    });
  }
  pairedRow("2", "100k assets as 5 requests of 20k: first POST → all Succeeded", "ms", times, baseTimes, atMost(1.5));
  pairedRow("2 floor", "row 2 against the durable floor of the same 100k in one go", "ms", times, floorTimes, atMost(1.3));
}

/** The ids of assets `from` … `from + count - 1`, as a delete job's body. */
const assetIdsBody = (count: number, from = 0) => new TextEncoder().encode(JSON.stringify(Array.from({ length: count }, (_, i) => asset(from + i).id)));

/** One run of the plain delete script: the assets of `assetsFile` imported untimed, then the ids of `idsFile` deleted. */
async function plainDelete(assetsFile: string, idsFile: string, kind: "ids" | "mirror" | "tombstones" = "ids"): Promise<{ ms: number; deleted: number }> {
  const dir = mkdtempSync(join(work, "plain-delete-"));
  try {
    return await runScript("baselines/plain-delete.ts", [assetsFile, idsFile, dir, kind]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Issue 46: deleting 100k records, one delete job, against a plain script deleting them in one transaction. Row d1t,
 * without a target: the same runs against the plain script that also leaves the tombstones, so that importd's own
 * cost shows apart from the tombstones' (docs/performance.md, "The delete rows").
 */
async function deletes() {
  const idsFile = writeBody("asset-ids-100k.json", assetIdsBody(records100k));
  const times: number[] = [];
  const baseTimes: number[] = [];
  const tombstoneBaseTimes: number[] = [];
  const deletedCounts: number[] = [];
  for (let i = 0; i < pairs; i++) {
    const plain = await plainDelete(file100k, idsFile);
    if (plain.deleted !== records100k) throw new Error(`the plain script deleted ${plain.deleted} of ${records100k}`);
    baseTimes.push(plain.ms);
    await withServer(async (server) => {
      await importAndWait(server, "assets", Bun.file(file100k));
      times.push(await importAndWait(server, "deletions/assets", Bun.file(idsFile)));
      deletedCounts.push((await latestOutput(server)).deleted ?? 0);
    });
    // After importd's run, not before it: row d1's pair stays as it was, one plain run and then importd's.
    const withTombstones = await plainDelete(file100k, idsFile, "tombstones");
    if (withTombstones.deleted !== records100k) throw new Error(`the plain script deleted ${withTombstones.deleted} of ${records100k}, with tombstones`);
    tombstoneBaseTimes.push(withTombstones.ms);
  }
  pairedRow("d1", `100k assets deleted, one request: POST → Succeeded (deleted: ${Math.min(...deletedCounts)})`, "ms", times, baseTimes, atMost(1.5, everyRun("deleted", deletedCounts, records100k)), { deletedCounts });
  pairedRow("d1t", "row d1's runs against a plain script deleting the same ids and leaving the same tombstones (one INSERT an id into importd's tombstones table)", "ms", times, tombstoneBaseTimes, null);
}

/**
 * Issue 46: a mirror of 100k assets whose source dropped 10% (the last 10k): its completion, which finds and deletes
 * them, against the plain script doing the same deletes in one transaction: every asset but the 90k ids the source
 * still has (a plain script that was handed the 10k ids to delete would skip the finding). The sync's import of the
 * 90k is not timed (an import, rows 1 and 2).
 */
async function mirror() {
  const dropped = records100k / 10;
  const idsFile = writeBody("asset-ids-kept.json", assetIdsBody(records100k - dropped));
  const kept = writeBody("assets-90k.json", assetsBody(records100k - dropped));
  const times: number[] = [];
  const baseTimes: number[] = [];
  const deletedCounts: number[] = [];
  for (let i = 0; i < pairs; i++) {
    const plain = await plainDelete(file100k, idsFile, "mirror");
    if (plain.deleted !== dropped) throw new Error(`the plain script deleted ${plain.deleted} of ${dropped}`);
    baseTimes.push(plain.ms);
    await withServer(async (server) => {
      await importAndWait(server, "assets", Bun.file(file100k));
      const opened = await fetch(`${server.base}/v2/syncs`, { method: "POST", headers: { "api-key": server.key, "content-type": "application/json" }, body: JSON.stringify({ resource: "assets" }) });
      if (opened.status !== 201) throw new Error(`opening a sync: ${opened.status} ${await opened.text()}`);
      const sync = ((await opened.json()) as { id: number }).id;
      await importAndWait(server, `assets?sync=${sync}`, Bun.file(kept));
      times.push(await importAndWait(server, `syncs/${sync}/complete`, new Uint8Array()));
      deletedCounts.push((await latestOutput(server)).deleted ?? 0);
    });
  }
  const what = `a mirror of 100k assets that drops 10%: its completion, POST → Succeeded (deleted: ${Math.min(...deletedCounts)}), against deleting all but the kept ids`;
  pairedRow("d2", what, "ms", times, baseTimes, atMost(1.5, everyRun("deleted", deletedCounts, dropped)), { deletedCounts });
}

/** One run of the plain export script: the assets of `assetsFile` imported untimed, then read in id order to an NDJSON file. */
async function plainExport(assetsFile: string): Promise<{ ms: number; records: number; bytes: number }> {
  const dir = mkdtempSync(join(work, "plain-export-"));
  try {
    return await runScript("baselines/plain-export.ts", [assetsFile, dir]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Issue 47: exporting 100k assets, GET /v2/exports/assets → its last byte, against a plain script reading the same
 * table in id order and writing the same NDJSON to a file. Runs alternate, so that a slow minute weighs on both sides.
 */
async function exports() {
  const times: number[] = [];
  const baseTimes: number[] = [];
  const counts: number[] = [];
  // Row e2: a client polling a job's status, one request after another, before the export (idle) and while it streams.
  const idlePolls: number[] = [];
  const exportPolls: number[] = [];
  for (let i = 0; i < pairs; i++) {
    const plain = await plainExport(file100k);
    if (plain.records !== records100k) throw new Error(`the plain script exported ${plain.records} of ${records100k}`);
    baseTimes.push(plain.ms);
    await withServer(async (server) => {
      const { id } = await server.post("assets", Bun.file(file100k));
      await server.waitSucceeded(id);
      const exportAll = async () => {
        const response = await fetch(`${server.base}/v2/exports/assets`, { headers: { "api-key": server.key } });
        let lines = 0;
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) lines++;
        return lines;
      };
      const start = performance.now();
      const lines = await exportAll();
      times.push(performance.now() - start);
      // Row e2 on a second export: polls one after another take a core of their own, which row e1 would pay.
      // The pollers run in a process of their own, as row 5's, so that this one's reading does not delay their clock;
      // each poller's first 300 ms are left out (its start and first connection are not the server's).
      const url = `${server.base}/v2/status/${id}`;
      const idleFrom = performance.timeOrigin + performance.now() + 300;
      const idlePoller = startPoller(url, server.key, 1);
      await Bun.sleep(1_300);
      idlePolls.push(...(await idlePoller.stop({ from: idleFrom, to: performance.timeOrigin + performance.now() })));
      const busyPoller = startPoller(url, server.key, 1);
      await Bun.sleep(300);
      const polledFrom = performance.timeOrigin + performance.now();
      await exportAll();
      exportPolls.push(...(await busyPoller.stop({ from: polledFrom, to: performance.timeOrigin + performance.now() })));
      counts.push(lines);
    });
  }
  const p99 = percentile(exportPolls, 99);
  rows.push({
    row: "e2",
    what: `a job's status polled during an export as row e1's (${exportPolls.length} polls, one after another, from another process): p99, against the same polls before it`,
    importd: p99,
    baseline: percentile(idlePolls, 99),
    unit: "ms",
    ratio: p99 / percentile(idlePolls, 99),
    target: "p99 ≤ 10 ms",
    ok: p99 <= 10,
    details: { p50: percentile(exportPolls, 50), max: Math.max(...exportPolls), idleP50: percentile(idlePolls, 50) },
  });
  const what = `100k assets exported as NDJSON: GET → last byte (records: ${Math.min(...counts)}), against a plain script reading the table to a file`;
  pairedRow("e1", what, "ms", times, baseTimes, atMost(1.5, everyRun("records", counts, records100k)), { counts });
}

async function timeTo202() {
  const { body, count } = assetsBodyOfSize(8 * 1024 * 1024);
  const file = writeBody("assets-8mb.json", body);
  const requests = quick ? 8 : 20;
  // Untimed on both sides, as in row 7: the tail measured is a running server's, not its first request's (the
  // first 8 MB intake of a fresh server took 285 ms, the next two 167 and 190, the rest 38-150; two, because
  // from the second on they fall among the timed ones). Their times are kept in the details, on both sides.
  const warmUp = 2;
  const base = await runScript<{ times: number[]; warmUpTimes: number[] }>("baselines/durable-intake.ts", [file, work, requests, warmUp]);
  const timed = await withServer(async (server) => {
    const samples: number[] = [];
    for (let i = 0; i < warmUp + requests; i++) {
      const start = performance.now();
      const { id } = await server.post("assets", body);
      samples.push(performance.now() - start);
      // Intake alone: the previous job is applied before the next request is sent.
      await server.waitSucceeded(id);
    }
    return samples;
  });
  const times = timed.slice(warmUp);
  const cold = { warmUpMs: timed.slice(0, warmUp), baselineWarmUpMs: base.warmUpTimes };
  for (const p of [50, 99]) {
    const ratio = percentile(times, p) / percentile(base.times, p);
    const what = `time to 202 for an 8 MB batch (${count} assets), p${p} of ${requests} after ${warmUp} untimed`;
    rows.push({ row: `3 p${p}`, what, importd: percentile(times, p), baseline: percentile(base.times, p), unit: "ms", ratio, target: "≤ 2×", ok: ratio <= 2, details: { runs: times, baselineRuns: base.times, ...cold } });
  }
}

/** wrk against a URL; returns requests per second. */
async function wrk(url: string, headers: Record<string, string>, seconds: number, connections: number): Promise<number> {
  const args = ["wrk", "-t2", `-c${connections}`, `-d${seconds}s`, ...Object.entries(headers).flatMap(([name, value]) => ["-H", `${name}: ${value}`]), url];
  const proc = spawn(args, { stdout: "pipe", stderr: "pipe" });
  const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  if (code !== 0) throw new Error(`wrk failed: ${out}`);
  const non2xx = out.match(/Non-2xx or 3xx responses: (\d+)/);
  if (non2xx) throw new Error(`wrk saw ${non2xx[1]} failed responses:\n${out}`);
  return Number(out.match(/Requests\/sec:\s+([\d.]+)/)![1]);
}

const heldPolls = 2_000;

async function statusThroughput() {
  if (!Bun.which("wrk")) {
    log("row 4 skipped: wrk is not installed (Debian: apt-get install wrk)");
    rows.push({ row: "4", what: "GET status throughput: wrk not installed (apt-get install wrk)", importd: NaN, baseline: NaN, unit: "req/s", ratio: NaN, target: "≥ 0.5×", ok: false });
    return;
  }
  // Short runs, alternated, rather than two long ones: one noisy sample (a bare-server run once at 82,000 req/s
  // against 49,000) is one pair of five, not the ratio.
  const seconds = quick ? 3 : 5;
  await withServer(async (server) => {
    const { id } = await server.post("assets", assetsBody(10));
    await server.waitSucceeded(id);
    const url = `${server.base}/v2/status/${id}`;
    const documentFile = writeBody("status.json", new Uint8Array(await (await fetch(url, { headers: { "api-key": server.key } })).arrayBuffer()));
    const bare = spawn([bun, join(here, "baselines/bare-server.ts"), documentFile], { env: runtimeEnv, stdout: "pipe" });
    const reader = bare.stdout.getReader();
    const port = Number(new TextDecoder().decode((await reader.read()).value).trim());
    // Alternated, so that a noisy neighbour hurts both alike.
    const measure = async () => {
      const samples = { importd: [] as number[], bare: [] as number[] };
      for (let i = 0; i < pairs; i++) {
        samples.bare.push(await wrk(`http://127.0.0.1:${port}/`, {}, seconds, 50));
        samples.importd.push(await wrk(url, { "api-key": server.key }, seconds, 50));
      }
      return samples;
    };
    try {
      const plain = await measure();
      pairedRow("4", `GET /v2/status/{id}, 50 connections, ${seconds} s a run (wrk)`, "req/s", plain.importd, plain.bare, atLeast(0.5));
      // The same, while 2,000 other clients long-poll a job that stays Pending (each held up to 60 s, longer than this takes).
      const polls = await holdPolls(server.base, server.key, await parkJob(server.dataDir), heldPolls);
      try {
        await waitHeld(server.process.url, heldPolls);
        const held = await measure();
        pairedRow("4", `the same, with ${heldPolls.toLocaleString("en")} long polls held open`, "req/s", held.importd, held.bare, atLeast(0.4));
      } finally {
        polls.close();
      }
    } finally {
      bare.kill();
    }
  });
}

/**
 * Starts the poller; `stop()` returns its latencies, those of the polls sent within `window` (epoch ms) if given: a
 * poller started for a window is up some tens of milliseconds later, and polls before or after it are idle ones.
 */
function startPoller(url: string, key: string, connections: number) {
  const proc = spawn([bun, join(here, "lib/poller.ts"), url, key, String(connections)], { stdin: "pipe", stdout: "pipe", stderr: "pipe" });
  return {
    async stop(window?: { from: number; to: number }): Promise<number[]> {
      proc.stdin.end();
      const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      if (code !== 0) throw new Error(`poller failed: ${err}`);
      const { latencies, sentAt } = JSON.parse(out) as { latencies: number[]; sentAt: number[] };
      return window ? latencies.filter((_, i) => sentAt[i]! >= window.from && sentAt[i]! <= window.to) : latencies;
    },
  };
}

async function bigImport() {
  const { body, count } = assetsBodyOfSize(maxBodyBytes);
  const file = writeBody("assets-100mb.json", body);
  const plain = await plainBaseline(file);
  await withServer(async (server) => {
    const { id: pollId } = await server.post("assets", assetsBody(10));
    await server.waitSucceeded(pollId);
    const url = `${server.base}/v2/status/${pollId}`;
    const idleSeconds = quick ? 2 : 5;
    const idlePoller = startPoller(url, server.key, 4);
    await Bun.sleep(idleSeconds * 1000);
    const idle = await idlePoller.stop();
    const busyPoller = startPoller(url, server.key, 4);
    const ms = await importAndWait(server, "assets", Bun.file(file));
    const busy = await busyPoller.stop();
    const peak = await peakRssOf(server.pid);
    const idleP99 = percentile(idle, 99);
    const busyP99 = percentile(busy, 99);
    const ratio = busyP99 / idleP99;
    rows.push({
      row: "5",
      what: `status poll p99, 4 connections, during a 100 MB import (${count} assets, ${round(ms / 1000, 1)} s) vs idle`,
      importd: busyP99,
      baseline: idleP99,
      unit: "ms",
      ratio,
      // Issue 45: the ratio to an idle p99 of under a millisecond measured the contention for 2 cores, not
      // importd (docs/performance.md, "What limits each row"); the target is what a user feels, the ratio stays shown.
      target: "p99 < 10 ms",
      ok: busyP99 < 10,
      details: { polls: busy.length, idlePolls: idle.length, busyP50: percentile(busy, 50), idleP50: percentile(idle, 50), busyMax: Math.max(...busy) },
    });
    const rssRatio = peak / plain.peakRssBytes;
    rows.push({ row: "6", what: "server peak RSS during the 100 MB import vs the plain script's", importd: peak / 2 ** 20, baseline: plain.peakRssBytes / 2 ** 20, unit: "MB", ratio: rssRatio, target: "≤ 1.5×", ok: rssRatio <= 1.5 });
  });
}

const smallJobs = 2_000;
const smallWarmUpJobs = 400;
const smallJobClients = 20;
type Rates = { acceptedPerSecond: number; completedPerSecond: number; cpuMs?: Record<string, number> };

/**
 * Each of the 20 clients sends its share one job at a time, client i to servers[i mod n]; resolves to each
 * client's last job id once all are accepted.
 */
function sendSmallJobs(servers: JobClient[], count: number, firstAsset: number): Promise<number[]> {
  const share = count / smallJobClients;
  return Promise.all(
    Array.from({ length: smallJobClients }, async (_, client) => {
      const server = servers[client % servers.length]!;
      let last = 0;
      for (let i = 0; i < share; i++) last = (await server.post("assets", JSON.stringify([asset(firstAsset + client * share + i)]))).id;
      return last;
    }),
  );
}

/**
 * accepted/s and completed/s of 2,000 one-record jobs; `waitDone` waits until every job is terminal, given each
 * client's last id. `cpuMs`, if given, says how much CPU each process of interest has used so far: the rates
 * then carry what each used during the timed part.
 */
async function smallJobRates(servers: JobClient[], waitDone: (lasts: number[]) => Promise<void>, cpuMs?: () => Record<string, number>): Promise<Rates> {
  // A running server, not one just started: the first few hundred requests are spent compiling its hot
  // paths (the JIT took a quarter of the server's CPU time in a cold run). The baseline loop warms up the same way,
  // and each of several instances takes as many as one alone would.
  await waitDone(await sendSmallJobs(servers, smallWarmUpJobs * servers.length, 1_000_000));
  const cpuBefore = cpuMs?.();
  const start = performance.now();
  const lasts = await sendSmallJobs(servers, smallJobs, 0);
  const acceptedMs = performance.now() - start;
  await waitDone(lasts);
  const completedMs = performance.now() - start;
  const rates: Rates = { acceptedPerSecond: (smallJobs / acceptedMs) * 1000, completedPerSecond: (smallJobs / completedMs) * 1000 };
  if (cpuMs && cpuBefore) {
    const cpuAfter = cpuMs();
    rates.cpuMs = Object.fromEntries(Object.entries(cpuAfter).map(([name, ms]) => [name, ms - (cpuBefore[name] ?? 0)]));
  }
  return rates;
}

/** A fresh HTTP queue floor (bench/baselines/http-queue.ts) in a directory of its own, for the time of `fn`. */
async function withHttpQueue<T>(fn: (queue: JobClient & { pid: number }) => Promise<T>): Promise<T> {
  const proc = spawn([bun, join(here, "baselines/http-queue.ts"), mkdtempSync(join(work, "http-queue-"))], { env: runtimeEnv, stdout: "pipe", stderr: "inherit" });
  try {
    const port = Number(new TextDecoder().decode((await proc.stdout.getReader().read()).value).trim());
    return await fn({ ...jobClient(`http://127.0.0.1:${port}`, "none"), pid: proc.pid });
  } finally {
    proc.kill();
    await proc.exited;
  }
}

/** µs of CPU a job, by thread or process name, in each run: ticks of 10 ms, so about ±5 µs over 2,000 jobs. */
const cpuUsPerJob = (runs: Rates[]) =>
  runs.map((run) => Object.fromEntries(Object.entries(run.cpuMs ?? {}).filter(([, ms]) => ms > 0).map(([name, ms]) => [name, Math.round((ms * 1000) / smallJobs)])));

/**
 * Row 7 (issue 45): importd against the HTTP queue floor, the least an HTTP service does for the same jobs (a
 * durable commit before each 202, then an apply in a transaction of its own), driven by the same 20 clients, polled
 * the same way; and against the queue loop without HTTP, no target, so that what HTTP costs stays in sight.
 */
async function manySmallJobs() {
  const doneWhenLastIs = (client: JobClient) => (lasts: number[]) => client.waitSucceeded(Math.max(...lasts), 2);
  // Jobs of an environment run in id order, and the floor applies them so: once the last is terminal, all are. Where
  // importd's CPU goes, by thread of the server and for this script (the 20 clients): bench/history/performance-log.md,
  // "Round three, third part".
  const importdCpu = (server: BenchServer) => () => ({ ...threadCpuMsOf(server.pid), "bench (the clients)": ownCpuMs() });
  const floorCpu = (pid: number) => () => ({ "http-queue": cpuMsOf(pid), "bench (the clients)": ownCpuMs() });
  const floorRuns: Rates[] = [];
  const loopRuns: Rates[] = [];
  const importdRuns: Rates[] = [];
  for (let i = 0; i < pairs; i++) {
    floorRuns.push(await withHttpQueue((queue) => smallJobRates([queue], doneWhenLastIs(queue), floorCpu(queue.pid))));
    loopRuns.push(await runScript<Rates>("baselines/sqlite-queue.ts", [mkdtempSync(join(work, "queue-")), smallJobs, smallWarmUpJobs]));
    importdRuns.push(await withServer((server) => smallJobRates([server], doneWhenLastIs(server), importdCpu(server))));
  }
  const cpu = { cpuUsPerJob: cpuUsPerJob(importdRuns), floorCpuUsPerJob: cpuUsPerJob(floorRuns) };
  log(`row 7: CPU per job (µs), importd by thread: ${cpu.cpuUsPerJob.map((run) => JSON.stringify(run)).join(" ")}`);
  log(`row 7: CPU per job (µs), the HTTP queue floor: ${cpu.floorCpuUsPerJob.map((run) => JSON.stringify(run)).join(" ")}`);
  const rate = (runs: Rates[], kind: "accepted" | "completed") => runs.map((run) => run[`${kind}PerSecond`]);
  for (const kind of ["accepted", "completed"] as const) {
    const what = `${smallJobs} one-record jobs from ${smallJobClients} clients: ${kind}/s`;
    pairedRow(`7 ${kind}`, `${what}, against the HTTP queue floor`, "jobs/s", rate(importdRuns, kind), rate(floorRuns, kind), atLeast(0.7), cpu);
    pairedRow(`7 ${kind}, loop`, "the same against the bun:sqlite queue loop (no HTTP)", "jobs/s", rate(importdRuns, kind), rate(loopRuns, kind), null);
  }
}

async function scaling() {
  const sizes = quick ? [1_000, 10_000, 100_000] : [1_000, 10_000, 100_000, 300_000];
  const rates: Record<number, number> = {};
  // 300k assets are about 110 MB: over the default 100 MB request limit, so this server allows more.
  await withServer(
    async (server) => {
      for (const size of sizes) {
        const body = assetsBody(size, 1_000_000);
        const times: number[] = [];
        // Each run on an empty table: a fresh id range per run.
        for (let i = 0; i < repeats; i++) times.push(await importAndWait(server, "assets", i === 0 ? body : assetsBody(size, 1_000_000 + (i * 400_000))));
        rates[size] = (size / median(times)) * 1000;
      }
    },
    ["--max-body-bytes", String(160 * 1024 * 1024)],
  );
  const largest = sizes[sizes.length - 1]!;
  const ratio = rates[largest]! / rates[10_000]!;
  rows.push({ row: "8", what: `records/s at ${largest / 1000}k ÷ at 10k (${sizes.map((size) => `${size / 1000}k: ${Math.round(rates[size]!)}/s`).join(", ")})`, importd: rates[largest]!, baseline: rates[10_000]!, unit: "records/s", ratio, target: "≥ 0.8×", ok: ratio >= 0.8, details: rates });
}

const postgresMissing = "no PostgreSQL server binaries (Debian: apt-get install postgresql)";

/** The PG rows without PostgreSQL: a line that says so, and the rows shown as not measured. */
function postgresSkipped(suite: string, rowsOf: Array<[row: string, what: string, unit: string, target: string]>) {
  log(`row ${suite} skipped: ${postgresMissing}`);
  for (const [row, what, unit, target] of rowsOf) rows.push({ row, what: `${what.split(":")[0]}: not measured, ${postgresMissing}`, importd: NaN, baseline: NaN, unit, ratio: NaN, target, ok: false });
}

type MergeRun = { emptyMs: number; updateMs: number; written: number; phases: { empty: Record<string, number>; update: Record<string, number> } };

/** Rows pg 1a and pg 1b: row 1 on PostgreSQL, against a plain COPY → merge script into the same server. */
async function postgresEndToEnd() {
  const what = (label: string) => `100k assets, one request, ${label}, on PostgreSQL: POST → Succeeded (baseline: COPY → merge)`;
  if (!postgresAvailable) return postgresSkipped("pg1", [["pg 1a", what("empty table"), "ms", "≤ 1.5×"], ["pg 1b", what("the same again (all unchanged)"), "ms", "≤ 1.3×"]]);
  const importdRuns = { empty: [] as ImportPhases[], update: [] as ImportPhases[] };
  const mergeRuns: MergeRun[] = [];
  for (let i = 0; i < pairs; i++) {
    // Alternating, each on a database of its own, so that a slow minute weighs on both sides alike.
    await withFreshDatabase((url) =>
      withServer(async (server) => {
        importdRuns.empty.push(await importAndTime(server, "assets", Bun.file(file100k)));
        importdRuns.update.push(await importAndTime(server, "assets", Bun.file(file100k)));
      }, ["--database-url", url]),
    );
    mergeRuns.push(await withFreshDatabase((url) => runScript<MergeRun>("baselines/pg-merge.ts", [file100k, url])));
  }
  // The baseline writes every row again the second time; importd finds them unchanged and writes none (as in row 1b).
  for (const [row, label, kind, target] of [["pg 1a", "empty table", "empty", 1.5], ["pg 1b", "the same again (all unchanged)", "update", 1.3]] as const) {
    const times = importdRuns[kind].map((run) => run.totalMs);
    const baseTimes = mergeRuns.map((run) => run[`${kind}Ms`]);
    pairedRow(row, what(label), "ms", times, baseTimes, atMost(target), { phases: importdRuns[kind], baselinePhases: mergeRuns.map((run) => run.phases[kind]) });
  }
}

// Each instance with one worker thread, so that both sides run three in all; see docs/performance.md.
const pgInstances = 3;
const pgWorkersEach = 1;

function ownCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/**
 * Row pg 7: row 7's 2,000 one-record jobs, completed/s with 3 instances on one database ÷ with 1 instance. Issue 45:
 * on one 2-core machine with the database on the same cores this measures contention, not scale-out, so the target
 * is only that more instances do not collapse the rate (scale-out is argued in docs/operations/postgresql.md).
 */
async function postgresSmallJobs() {
  const what = `${smallJobs} one-record jobs from ${smallJobClients} clients on PostgreSQL: completed/s, ${pgInstances} instances (${pgWorkersEach} worker each) vs 1 (${pgInstances * pgWorkersEach} workers), no collapse`;
  if (!postgresAvailable) return postgresSkipped("pg7", [["pg 7", what, "jobs/s", "≥ 0.8×"]]);
  // On PostgreSQL ids are not commit order, but a run follows commit order (its sequence), and each client's jobs
  // commit one after the other: once every client's last job is terminal, all are.
  const everyLast = (server: BenchServer) => async (lasts: number[]) => {
    for (const id of [...lasts].sort((a, b) => b - a)) await server.waitSucceeded(id, 2);
  };
  // Where the CPU goes, per process: each instance, the database's backends, and this script (the 20 clients).
  const cpuOf = (url: string, servers: BenchServer[]) => () => ({
    ...Object.fromEntries(servers.map((server, i) => [`importd ${i + 1}`, cpuMsOf(server.pid)])),
    postgres: backendsCpuMs(url),
    bench: ownCpuMs(),
  });
  const measure = (instances: number, workersEach: number) =>
    withFreshDatabase((url) => withInstances(url, instances, workersEach, (servers) => smallJobRates(servers, everyLast(servers[0]!), cpuOf(url, servers))));
  const oneRuns: Rates[] = [];
  const manyRuns: Rates[] = [];
  for (let i = 0; i < pairs; i++) {
    oneRuns.push(await measure(1, pgInstances * pgWorkersEach));
    manyRuns.push(await measure(pgInstances, pgWorkersEach));
  }
  const completed = (runs: Rates[]) => runs.map((run) => run.completedPerSecond);
  const details = {
    accepted: manyRuns.map((run) => run.acceptedPerSecond),
    baselineAccepted: oneRuns.map((run) => run.acceptedPerSecond),
    cpuMs: manyRuns.map((run) => run.cpuMs),
    baselineCpuMs: oneRuns.map((run) => run.cpuMs),
  };
  pairedRow("pg 7", what, "jobs/s", completed(manyRuns), completed(oneRuns), atLeast(0.8), details);
}

/**
 * Row 7w: row 7's small jobs with a webhook subscription whose receiver accepts connections and never answers, against
 * the same without one (DECISIONS 10: delivering must not slow the queue). Every job then writes its event to the outbox
 * in its run's transaction; the attempts hang for their 10 s each, one at a time, beside the queue.
 */
async function smallJobsWithHangingWebhook() {
  const hanging = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Promise<Response>(() => {}), idleTimeout: 0 });
  const answering = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response(null, { status: 204 }) });
  try {
    const allow = ["--webhook-allow", "127.0.0.1/32"];
    const measure = (receiver?: { port?: number }) =>
      withServer(async (server) => {
        if (receiver) {
          const response = await fetch(`${server.base}/v2/webhooks`, { method: "POST", headers: { "api-key": server.key, "content-type": "application/json" }, body: JSON.stringify({ url: `http://127.0.0.1:${receiver.port}/hook` }) });
          if (response.status !== 201) throw new Error(`subscribing: ${response.status} ${await response.text()}`);
        }
        return smallJobRates([server], (lasts) => server.waitSucceeded(Math.max(...lasts), 2));
      }, allow);
    const without: Rates[] = [];
    const toHanging: Rates[] = [];
    const toAnswering: Rates[] = [];
    for (let i = 0; i < pairs; i++) {
      without.push(await measure());
      toHanging.push(await measure(hanging));
      toAnswering.push(await measure(answering));
    }
    const rate = (runs: Rates[], kind: "accepted" | "completed") => runs.map((run) => run[`${kind}PerSecond`]);
    for (const kind of ["accepted", "completed"] as const) {
      for (const [row, what, baseRuns] of [
        [`7w ${kind}`, `row 7 with a webhook subscription whose receiver hangs vs without: ${kind}/s`, without],
        // The hanging itself, apart from what any subscription costs (every ended job writes its outbox row).
        [`7h ${kind}`, `row 7 with a webhook subscription whose receiver hangs vs one whose receiver answers: ${kind}/s`, toAnswering],
      ] as const) {
        pairedRow(row, what, "jobs/s", rate(toHanging, kind), rate(baseRuns, kind), atLeast(0.9));
      }
    }
  } finally {
    hanging.stop(true);
    answering.stop(true);
  }
}

/** A command's CPU from its start to its exit, in ms (its own rusage: every thread, none of its parent's). */
async function commandCpuMs(command: string[]): Promise<number> {
  const proc = spawn(command, { env: runtimeEnv, stdout: "ignore", stderr: "pipe" });
  const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`${command.join(" ")} exited ${code}: ${stderr}`);
  return Number(proc.resourceUsage()!.cpuTime.total) / 1000;
}

/** A server's CPU from its start to its first 200 on /readyz, in ms; then it is stopped (SIGTERM) and waited for. */
async function serverCpuMs(binary: string, dataDir: string): Promise<number> {
  const { proc, url } = await spawnServer(dataDir, [], 30_000, { command: [binary], cwd: here, env: runtimeEnv });
  try {
    while (!(await fetch(`${url}/readyz`).then((answer) => answer.ok, () => false))) await Bun.sleep(5);
    return cpuMsOf(proc.pid);
  } finally {
    proc.kill("SIGTERM");
    await proc.exited;
  }
}

/**
 * Row s: what the shipped executable costs to start. Every `importd import` a user runs is a start, and so is every
 * restart; the tests start importd some 900 times a CI run. s1 is a command that opens the store (`importd env
 * list`), against a compiled Bun program that prints a line (baselines/start-floor.ts): the least any start costs.
 * s2 is a server on a data directory it served before, to its first /readyz answer (two worker threads, the
 * default, each loading its code), against the same source built as one bundle without bytecode, which Bun parsed
 * whole at every start (package.json's build script without --splitting and --bytecode, as it was until 28 Nov).
 */
async function startUp() {
  const dir = mkdtempSync(join(work, "start-"));
  const [binary, oneBundle, floor] = ["importd", "importd-one-bundle", "start-floor"].map((name) => join(dir, name)) as [string, string, string];
  buildImportd(binary);
  buildImportd(oneBundle, (script) => script.replace(/ --splitting| --bytecode| --format=esm/g, ""));
  const compiled = Bun.spawnSync([bun, "build", "--compile", "--minify", join(here, "baselines/start-floor.ts"), "--outfile", floor], { stdout: "pipe", stderr: "pipe" });
  if (compiled.exitCode !== 0) throw new Error(`building the start floor failed: ${compiled.stderr}`);
  const dataDir = join(dir, "data");
  await commandCpuMs([binary, "env", "create", "bench", "--data-dir", dataDir]);
  await serverCpuMs(binary, dataDir);
  const command: number[] = [];
  const commandFloor: number[] = [];
  const server: number[] = [];
  const serverOneBundle: number[] = [];
  // Ten pairs: a start is some 50 to 400 ms of CPU, counted by the kernel in 10 ms ticks for the servers.
  for (let i = 0; i < pairs * 2; i++) {
    command.push(await commandCpuMs([binary, "env", "list", "--data-dir", dataDir]));
    commandFloor.push(await commandCpuMs([floor]));
    server.push(await serverCpuMs(binary, dataDir));
    serverOneBundle.push(await serverCpuMs(oneBundle, dataDir));
  }
  pairedRow("s1", "`importd env list`: CPU from start to exit", "ms", command, commandFloor, atMost(8));
  pairedRow("s2", "`importd serve`, data served before: CPU to the first /readyz answer", "ms", server, serverOneBundle, atMost(0.8));
}

const suites: Array<[string, () => Promise<void>]> = [
  ["1", endToEnd],
  ["2", fiveRequests],
  ["d1", deletes],
  ["d2", mirror],
  ["e1", exports],
  ["3", timeTo202],
  ["4", statusThroughput],
  ["5", bigImport],
  ["7", manySmallJobs],
  ["7w", smallJobsWithHangingWebhook],
  ["8", scaling],
  ["pg1", postgresEndToEnd],
  ["pg7", postgresSmallJobs],
  ["s", startUp],
];

const started = performance.now();
try {
  for (const [name, suite] of suites) {
    if (only && !only.includes(name)) continue;
    log(`row ${name}…`);
    await suite();
  }
} finally {
  await stopPostgres();
  rmSync(work, { recursive: true, force: true });
}

const format = (value: number, unit: string) => (Number.isNaN(value) ? "—" : `${value >= 100 ? Math.round(value).toLocaleString("en") : round(value, 2)} ${unit}`);
const spread = (pairs: Row["pairs"]) => (pairs ? `${pairs.count}: ${round(pairs.lowest)}–${round(pairs.highest)}×` : "—");
const verdict = (ok: boolean | null) => (ok === null ? "" : ok ? "ok" : "MISSED");
const table = [
  "| # | what | importd | baseline | ratio | pairs: lowest–highest | target | |",
  "|---|---|---:|---:|---:|---|---|---|",
  ...rows.map((r) => `| ${r.row} | ${r.what} | ${format(r.importd, r.unit)} | ${format(r.baseline, r.unit)} | ${Number.isNaN(r.ratio) ? "—" : `${round(r.ratio)}×`} | ${spread(r.pairs)} | ${r.target} | ${verdict(r.ok)} |`),
].join("\n");
console.log(table);
console.log("\nimportd and baseline: each side's median. ratio: for rows of pairs, the median of the pair ratios (importd ÷ baseline, run i against run i), which decides the row.");

const cpu = cpus()[0]?.model ?? "unknown";
const machine = { cpu, cores: cpus().length, memoryGiB: round(totalmem() / 2 ** 30, 1), freeMemoryGiB: round(freemem() / 2 ** 30, 1), kernel: release(), bun: Bun.version };
const results = { date: new Date().toISOString(), quick, repeats, pairs, machine, durationSeconds: round((performance.now() - started) / 1000, 1), rows };
writeFileSync(join(here, "results.json"), `${JSON.stringify(results, null, 2)}\n`);
const targeted = rows.filter((r) => r.ok !== null);
console.error(`[bench] ${targeted.filter((r) => r.ok).length} of ${targeted.length} targets met in ${results.durationSeconds} s; bench/results.json written`);
if (quick) console.error(`[bench] --quick: ${pairs} pair a row, a look and not a verdict; the targets are judged on the full run's 5`);
