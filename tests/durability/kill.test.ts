import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { postJson, waitForJob } from "../helpers/api";
import { queryStore, spawnServer, type ServerProcess } from "../helpers/process";
import { assetsBody, seedReferenceData } from "../helpers/records";
import { tempDir, testBackend } from "../helpers/server";

const dataDir = tempDir("importd-kill-");
let running: ServerProcess | undefined;
afterAll(() => {
  running?.proc.kill("SIGKILL");
  rmSync(dataDir, { recursive: true, force: true });
});

test("a server SIGKILLed right after the 202 of a large batch applies every record after restart", async () => {
  running = await spawnServer(dataDir);
  const key = running.firstRunKey!;
  expect(key).toBeDefined();
  await seedReferenceData(`${running.url}/default`, key);

  const { body, count } = assetsBody(20 * 1024 * 1024);
  const response = await postJson(`${running.url}/default`, "assets", key, body);
  expect(response.status).toBe(202);
  running.proc.kill("SIGKILL");
  const { id } = await response.json();
  await running.proc.exited;

  running = await spawnServer(dataDir);
  expect(running.firstRunKey).toBeUndefined();
  const job = await waitForJob(`${running.url}/default`, key, id, 120_000);
  expect(job.importJobStatus).toBe("Succeeded");
  expect(job.output).toMatchObject({ total: count, applied: count, rejected: 0 });
  running.proc.kill("SIGKILL");
  await running.proc.exited;
  running = undefined;

  if (testBackend === "sqlite") expect(await queryStore(dataDir, "PRAGMA integrity_check")).toEqual([{ integrity_check: "ok" }]);
  expect(await queryStore(dataDir, "SELECT count(*) AS n FROM assets")).toEqual([{ n: count }]);
  expect(await queryStore(dataDir, "SELECT count(*) AS n FROM job_payloads")).toEqual([{ n: 0 }]);
}, 180_000);
