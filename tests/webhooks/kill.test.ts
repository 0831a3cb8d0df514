import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { importAndWait, postJson, waitForJob } from "../helpers/api";
import { withTestHooks, queryStore, spawnServer, type ServerProcess } from "../helpers/process";
import { Receiver } from "../helpers/receiver";
import { asset, seedReferenceData } from "../helpers/records";
import { tempDir, testBackend } from "../helpers/server";

// Nothing lost (DECISIONS 10): a job's event is written in the transaction that ends it, so a server killed right
// after that commit, before it sent anything, delivers the event once it is started again.

const dataDir = tempDir("importd-webhook-kill-");
let running: ServerProcess | undefined;
let receiver: Receiver | undefined;
afterAll(async () => {
  running?.proc.kill("SIGKILL");
  await receiver?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

test("SIGKILL right after a run commits: the job's event is delivered after the restart, signed, once the receiver says so", async () => {
  receiver = await Receiver.start();
  const allow = ["--webhook-allow", "127.0.0.1/32"];
  running = await spawnServer(dataDir, allow, 30_000, withTestHooks({ IMPORTD_TEST_KILL_AFTER_COMMIT_ON_RECORD_ID: "A-KILL-AFTER-COMMIT" }));
  const key = running.firstRunKey!;
  const base = `${running.url}/default`;
  await seedReferenceData(base, key);
  const subscribed = await fetch(`${base}/v2/webhooks`, { method: "POST", headers: { "api-key": key, "content-type": "application/json" }, body: JSON.stringify({ url: `${receiver.url}/after-kill` }) });
  expect(subscribed.status).toBe(201);
  receiver.secret = ((await subscribed.json()) as { secret: string }).secret;
  const before = receiver.received.length;

  // The run applying this record commits, and the process is killed at once.
  const response = await postJson(base, "assets", key, JSON.stringify([asset(1, { id: "A-KILL-AFTER-COMMIT" })]));
  expect(response.status).toBe(202);
  const { id } = (await response.json()) as { id: number };
  expect(await running.proc.exited).not.toBe(0);
  expect(receiver.received.length).toBe(before);
  expect(await queryStore(dataDir, "SELECT status FROM jobs WHERE id = ?", id)).toEqual([{ status: "Succeeded" }]);
  expect(await queryStore(dataDir, "SELECT status, attempts FROM webhook_deliveries WHERE job_id = ?", id)).toEqual([{ status: "pending", attempts: 0 }]);

  running = await spawnServer(dataDir, allow);
  // On SQLite the restarted server frees the claims of the one that was killed (it owned the database). On PostgreSQL an
  // instance cannot tell a dead one's claim from a live one's: the delivery may wait out its 20 s lease.
  const [message] = await receiver.waitFor(1, (received) => received.path === "/after-kill", testBackend === "postgres" ? 45_000 : 10_000);
  expect(message).toMatchObject({ verified: true, body: { type: "job.succeeded", data: { id, importJobStatus: "Succeeded" } } });
  expect(await waitForJob(`${running.url}/default`, key, id)).toMatchObject({ importJobStatus: "Succeeded" });
  // Later jobs go out as usual.
  await importAndWait(`${running.url}/default`, "assets", key, [asset(2)]);
  await receiver.waitFor(2, (received) => received.path === "/after-kill");
}, 120_000);
