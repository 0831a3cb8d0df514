/** A real importd server for the benchmarks: its own process, an empty data directory, reference data imported. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnServer, type ServerProcess } from "../../tests/helpers/process";
import { referenceData } from "./data";

export type BenchServer = {
  base: string;
  key: string;
  pid: number;
  process: ServerProcess;
  post(resource: string, body: Uint8Array | string): Promise<{ id: number }>;
  status(id: number): Promise<{ importJobStatus: string; output: { applied: number; rejected: number } | null }>;
  /** Polls every `intervalMs` until the job is terminal; throws unless it Succeeded. */
  waitSucceeded(id: number, intervalMs?: number): Promise<void>;
  stop(): Promise<void>;
};

const terminal = new Set(["Succeeded", "PartiallySucceeded", "Failed"]);

export async function startBenchServer(extraArgs: string[] = []): Promise<BenchServer> {
  const dataDir = mkdtempSync(join(tmpdir(), "importd-bench-"));
  const process = await spawnServer(dataDir, extraArgs);
  const base = `${process.url}/default`;
  const key = process.firstRunKey!;
  const headers = { "api-key": key };
  const server: BenchServer = {
    base,
    key,
    pid: process.proc.pid,
    process,
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
        const job = await server.status(id);
        if (terminal.has(job.importJobStatus)) {
          if (job.importJobStatus !== "Succeeded") throw new Error(`job ${id} ${job.importJobStatus}: ${JSON.stringify(job.output).slice(0, 300)}`);
          return;
        }
        await Bun.sleep(intervalMs);
      }
    },
    async stop() {
      process.proc.kill("SIGTERM");
      await process.proc.exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  for (const [resource, records] of Object.entries(referenceData)) {
    const { id } = await server.post(resource, JSON.stringify(records));
    await server.waitSucceeded(id);
  }
  return server;
}

/** Wall time from the POST to the job observed Succeeded. */
export async function importAndWait(server: BenchServer, resource: string, body: Uint8Array): Promise<number> {
  const start = performance.now();
  const { id } = await server.post(resource, body);
  await server.waitSucceeded(id);
  return performance.now() - start;
}
