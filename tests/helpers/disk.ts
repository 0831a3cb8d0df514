import { closeSync, openSync, writeSync } from "node:fs";
import type { ServerProcess } from "./process";
import { until } from "./until";

/**
 * Writes to `file` (after what it holds) until its filesystem is full (ENOSPC); answers how many bytes that took.
 * Called again, it takes back whatever space was freed since (a database may give some back).
 */
export function fillTheDisk(file: string): number {
  const fd = openSync(file, "a");
  const chunk = new Uint8Array(256 * 1024);
  let written = 0;
  try {
    for (;;) written += writeSync(fd, chunk);
  } catch (error) {
    if ((error as { code?: string }).code !== "ENOSPC") throw error;
  } finally {
    closeSync(fd);
  }
  return written;
}

/**
 * Sends imports (`send(n)`, the n-th from 0) until one is refused for lack of space, and answers it: a database may
 * still write into space its files already hold, so the first imports after the disk filled may be accepted (their
 * ids go in `accepted`). After each, the filler takes back any space the database gave back to the filesystem, so
 * that the space left can only shrink: a refusal must come, however fast or slow the machine.
 */
export async function importUntilRefused(send: (n: number) => Promise<Response>, filler: string, accepted: Array<[number, number]>, recordsEach: number): Promise<Response> {
  let n = 0;
  const refused = await until(
    async () => {
      const response = await send(n++);
      if (response.status !== 202) return response;
      accepted.push([((await response.json()) as { id: number }).id, recordsEach]);
      fillTheDisk(filler);
      return undefined;
    },
    { what: "an import refused for lack of space", deadlineMs: 120_000, everyMs: 0 },
  );
  return refused!;
}

/**
 * Until every job of `jobs` (in order, one environment) has either finished or met the full disk in a run (the
 * server's log says its attempt failed and will be retried): what was going to happen while the disk is full has.
 */
export async function jobsMetTheFullDisk(server: ServerProcess, jobs: Array<[number, number]>, status: (jobId: number) => Promise<string>): Promise<void> {
  await until(
    async () => {
      for (const [jobId] of jobs) {
        const now = await status(jobId);
        if (now === "Succeeded") continue;
        if (now === "Failed") throw new Error(`job ${jobId} Failed on a full disk`);
        // Jobs run in order: the first not finished is the one that must have met the full disk.
        return server.stderrLines.some((line) => line.includes("job attempt failed") && line.includes(`"jobId":${jobId}`));
      }
      return true;
    },
    { what: "each accepted job finished, or its run retried after meeting the full disk", deadlineMs: 60_000 },
  );
}
