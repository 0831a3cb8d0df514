import { Database } from "bun:sqlite";
import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { databaseFile } from "../../src/store/sqlite/database";
import { postJson, waitForJob } from "../helpers/api";
import { spawnServer, type ServerProcess } from "../helpers/process";
import { assetsBody, seedReferenceData } from "../helpers/records";
import { tempDir } from "../helpers/server";

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

  const db = new Database(databaseFile(dataDir));
  expect(db.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
  expect(db.query("SELECT count(*) AS n FROM assets").get()).toEqual({ n: count });
  expect(db.query("SELECT count(*) AS n FROM job_payloads").get()).toEqual({ n: 0 });
  db.close();
}, 180_000);
