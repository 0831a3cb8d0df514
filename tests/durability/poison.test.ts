import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { getJob, waitForJob } from "../helpers/api";
import { withTestHooks, spawnServer, type ServerProcess } from "../helpers/process";
import { tempDir } from "../helpers/server";

// A job that kills the whole server process every time it runs (a test hook, IMPORTD_TEST_KILL_PROCESS_ON_RECORD_ID,
// SIGKILLs the process when a run is about to apply the record with that id). Its attempts are counted in the
// database when its run is claimed, so they survive the kills: after 3, the next start gives it up.
const dataDir = tempDir("importd-poison-");
const launch = withTestHooks({ IMPORTD_TEST_KILL_PROCESS_ON_RECORD_ID: "poison" });
let server: ServerProcess | undefined;
afterAll(() => {
  server?.proc.kill("SIGKILL");
  rmSync(dataDir, { recursive: true, force: true });
});

/** Starts the server and waits for it to die (it may die before it has even said it listens). */
async function startAndBeKilled(): Promise<void> {
  try {
    server = await spawnServer(dataDir, ["--workers", "2"], 30_000, launch);
  } catch (error) {
    if (!String(error).includes("exited before listening")) throw error;
    return;
  }
  expect(await server.proc.exited).not.toBe(0);
  expect(server.proc.signalCode).toBe("SIGKILL");
  server = undefined;
}

test("a job that kills the whole process each time it runs is given up as Failed after 3 attempts, across restarts", async () => {
  server = await spawnServer(dataDir, ["--workers", "2"], 30_000, launch);
  const key = server.firstRunKey!;
  // The run starts as soon as the job is committed, and may kill the process before its 202 is on the wire.
  const answered = await fetch(`${server.url}/default/v2/subareas`, {
    method: "POST",
    headers: { "content-type": "application/json", "api-key": key },
    body: JSON.stringify([{ id: "poison", name: "Kills the process" }]),
  }).then((response) => (response.status === 202 ? ((response.json() as Promise<{ id: number }>)) : Promise.reject(new Error(`answered ${response.status}`))), () => undefined);
  // Attempt 1 kills this process; attempts 2 and 3 kill the next two starts.
  expect(server.proc.signalCode ?? (await server.proc.exited, server.proc.signalCode)).toBe("SIGKILL");
  server = undefined;
  await startAndBeKilled();
  await startAndBeKilled();

  server = await spawnServer(dataDir, ["--workers", "2"], 30_000, launch);
  const listed = (await (await fetch(`${server.url}/default/v2/jobs`, { headers: { "api-key": key } })).json()) as { items: Array<{ id: number }> };
  expect(listed.items).toHaveLength(1);
  const id = listed.items[0]!.id;
  if (answered) expect(answered.id).toBe(id);
  const job = await waitForJob(`${server.url}/default`, key, id);
  expect(job.importJobStatus).toBe("Failed");
  expect(job.output?.message).toContain("could not be processed after 3 attempts");
  // The queue moves on.
  const next = await fetch(`${server.url}/default/v2/subareas`, {
    method: "POST",
    headers: { "content-type": "application/json", "api-key": key },
    body: JSON.stringify([{ id: "north", name: "North" }]),
  });
  expect((await waitForJob(`${server.url}/default`, key, ((await next.json()) as { id: number }).id)).importJobStatus).toBe("Succeeded");
  expect((await getJob(`${server.url}/default`, key, id)).importJobStatus).toBe("Failed");
}, 120_000);
