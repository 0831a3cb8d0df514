import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Server } from "bun";
import { parseWebhookAllow } from "../../src/net/allow-list";
import { maxInFlightPerEnvironment } from "../../src/webhooks/dispatcher";
import { importAndWait, importBatch, waitForJob } from "../helpers/api";
import { Receiver } from "../helpers/receiver";
import { startTestServer, type TestServer } from "../helpers/server";

// The measured attack of issue 43 (DECISIONS 15): one environment subscribes 48 webhooks to a receiver that accepts
// connections and never answers; another environment's delivery must still arrive within seconds. Before the
// dispatcher's slots went round the environments, the hanging receivers held all 16 for 10 s at a time, and the
// other tenant waited about 100 s.

let server: TestServer;
let receiver: Receiver;
let hanging: Server<undefined>;
let hangingRequests = 0;
beforeAll(async () => {
  receiver = await Receiver.start();
  hanging = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    idleTimeout: 0,
    fetch: () => {
      hangingRequests++;
      return new Promise<Response>(() => {});
    },
  });
  server = await startTestServer({ webhookAllow: parseWebhookAllow("127.0.0.1/32,::1/128") });
});
afterAll(async () => {
  // Its connections closed first: the attempts in flight end now rather than after their 10 s, and the server stops at once.
  await hanging.stop(true);
  await server.close();
  await receiver.stop();
});

const subscribe = async (base: string, key: string, url: string) => {
  const response = await fetch(`${base}/v2/webhooks`, { method: "POST", headers: { "api-key": key, "content-type": "application/json" }, body: JSON.stringify({ url }) });
  expect(response.status).toBe(201);
  return (await response.json()) as { id: number; secret: string };
};

async function until(what: string, condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await Bun.sleep(10);
  }
}

test(
  "48 subscriptions of one environment to a receiver that hangs do not hold up another environment's delivery: it arrives within seconds",
  async () => {
    const other = await server.addEnvironment("isolation-other");
    for (let i = 0; i < 48; i++) await subscribe(server.base, server.key, `http://127.0.0.1:${hanging.port}/hook/${i}`);
    receiver.secret = (await subscribe(other.base, other.key, `${receiver.url}/other`)).secret;

    // The hanging environment's job ends first: its 48 deliveries are due before the other's one.
    await importAndWait(server.base, "subareas", server.key, [{ id: "hang", name: "Hang" }]);
    await until("the hanging receiver's first requests", () => hangingRequests >= maxInFlightPerEnvironment, 10_000);
    const hungAt = Date.now();

    const accepted = await importBatch(other.base, "subareas", other.key, [{ id: "quick", name: "Quick" }]);
    const ended = await waitForJob(other.base, other.key, accepted.id);
    const endedAt = Date.now();
    const [message] = await receiver.waitFor(1, (message) => message.body.data.id === ended.id, 5_000);
    expect(message).toMatchObject({ verified: true, path: "/other", body: { type: "job.succeeded" } });
    expect(Date.now() - endedAt).toBeLessThan(5_000);
    // The hanging environment holds its share of the slots, no more, while its first attempts hang (10 s each; a
    // machine so slow that they ended meanwhile has let the next ones go, and proves nothing here).
    if (Date.now() - hungAt < 9_000) expect(hangingRequests).toBe(maxInFlightPerEnvironment);
  },
  60_000,
);
