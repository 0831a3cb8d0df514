/**
 * A real importd server for the benchmarks: its own process, an empty data directory (or an empty PostgreSQL
 * database, with `--database-url`), reference data imported.
 */
import type { BunFile } from "bun";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { withTestHooks, spawnServer, type ServerProcess } from "../../tests/helpers/process";
import { referenceData } from "./data";
import { runtimeVariables } from "./runtime";

/** What a client of importd's jobs API does: the bench's only way in, to importd and to row 7's HTTP queue floor alike. */
export type JobClient = {
  base: string;
  key: string;
  /** A file is posted as a client uploading it would (curl's --data-binary @file): see bench/history/performance-log.md, "Running it". */
  post(resource: string, body: Uint8Array | string | BunFile): Promise<{ id: number }>;
  status(id: number): Promise<JobStatus>;
  /** Polls every `intervalMs` until the job is terminal; throws unless it Succeeded. */
  waitSucceeded(id: number, intervalMs?: number): Promise<void>;
};

export type BenchServer = JobClient & {
  pid: number;
  dataDir: string;
  process: ServerProcess;
  stop(): Promise<void>;
};

type JobStatus = {
  importJobStatus: string;
  output: { applied: number; rejected: number } | null;
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
};

const terminal = new Set(["Succeeded", "PartiallySucceeded", "Failed"]);

/** A client of the jobs API under `base` (an environment's URL), sending `key`. */
export function jobClient(base: string, key: string): JobClient {
  const headers = { "api-key": key };
  const client: JobClient = {
    base,
    key,
    async post(resource, body) {
      const response = await fetch(`${base}/v2/${resource}`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: body as BodyInit });
      const json = (await response.json()) as { id: number };
      if (response.status !== 202) throw new Error(`POST ${resource}: ${response.status} ${JSON.stringify(json).slice(0, 300)}`);
      return json;
    },
    async status(id) {
      return (await (await fetch(`${base}/v2/status/${id}`, { headers })).json()) as never;
    },
    async waitSucceeded(id, intervalMs = 5) {
      for (;;) {
        const job = await client.status(id);
        if (terminal.has(job.importJobStatus)) {
          if (job.importJobStatus !== "Succeeded") throw new Error(`job ${id} ${job.importJobStatus}: ${JSON.stringify(job.output).slice(0, 300)}`);
          return;
        }
        await Bun.sleep(intervalMs);
      }
    },
  };
  return client;
}

/**
 * `joinKey`: the key of an instance already running on the same database (given `--database-url`); only the
 * first instance on a database prints one, and it has imported the reference data for all.
 */
export async function startBenchServer(extraArgs: string[] = [], joinKey?: string): Promise<BenchServer> {
  const dataDir = mkdtempSync(join(tmpdir(), "importd-bench-"));
  const process = await spawnServer(dataDir, extraArgs, undefined, withTestHooks(runtimeVariables));
  const server: BenchServer = {
    ...jobClient(`${process.url}/default`, joinKey ?? process.firstRunKey!),
    pid: process.proc.pid,
    dataDir,
    process,
    async stop() {
      process.proc.kill("SIGTERM");
      await process.proc.exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  if (joinKey) return server;
  for (const [resource, records] of Object.entries(referenceData)) {
    const { id } = await server.post(resource, JSON.stringify(records));
    await server.waitSucceeded(id);
  }
  return server;
}

/** Wall time from the POST to the job observed Succeeded. */
export async function importAndWait(server: BenchServer, resource: string, body: Uint8Array | BunFile): Promise<number> {
  const start = performance.now();
  const { id } = await server.post(resource, body);
  await server.waitSucceeded(id);
  return performance.now() - start;
}

/** Where an import's time went (ms): see importAndTime. */
export type ImportPhases = { totalMs: number; acceptedMs: number; startedMs: number; appliedMs: number; seenMs: number };

/**
 * importAndWait, split in phases on the wall clock, which the server's job timestamps share (same machine, ms
 * resolution): POST → 202 (intake), 202 → started (queued and claimed; below zero when a worker started it
 * before the 202 reached us), started → completed (the run), completed → seen Succeeded (the polling).
 */
export async function importAndTime(server: BenchServer, resource: string, body: Uint8Array | BunFile): Promise<ImportPhases> {
  const start = performance.now();
  const postedAt = Date.now();
  const { id } = await server.post(resource, body);
  const acceptedAt = Date.now();
  await server.waitSucceeded(id);
  const seenAt = Date.now();
  const totalMs = performance.now() - start;
  const job = await server.status(id);
  const startedAt = Date.parse(job.startedAt!);
  const completedAt = Date.parse(job.completedAt!);
  return { totalMs, acceptedMs: acceptedAt - postedAt, startedMs: startedAt - acceptedAt, appliedMs: completedAt - startedAt, seenMs: seenAt - completedAt };
}
