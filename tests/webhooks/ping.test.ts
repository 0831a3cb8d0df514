import { afterAll, beforeAll, expect, test } from "bun:test";
import { parseWebhookAllow } from "../../src/net/allow-list";
import { pingsPerMinute } from "../../src/webhooks/ping-limit";
import { importAndWait } from "../helpers/api";
import { Receiver } from "../helpers/receiver";
import { stopChecking } from "../helpers/contract";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { startTestServer, tempDir, testBackend, type TestServer } from "../helpers/server";

// POST /v2/webhooks/{id}/test is not a read-back tool (issue 43, DECISIONS 15): it answers the receiver's status and
// time, never its body; it is limited per environment; a refused destination is answered without what its name
// resolves to. The deliveries listing shows no receiver's body either.

let server: TestServer;
let receiver: Receiver;
beforeAll(async () => {
  receiver = await Receiver.start();
  // What an internal service the operator allowed might answer: nothing of it may come back to the key holder.
  receiver.answer = () => new Response("internal: db password is hunter2", { status: 500 });
  server = await startTestServer({ webhookAllow: parseWebhookAllow("127.0.0.1/32,localhost"), testHooks: { webhookRetryScale: 0.002 } });
});
afterAll(async () => {
  await server.close();
  await receiver.stop();
});

const post = (base: string, key: string, path: string, body?: unknown) =>
  fetch(`${base}${path}`, { method: "POST", headers: { "api-key": key, "content-type": "application/json" }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
const subscribe = async (base: string, key: string, url: string) => {
  const response = await post(base, key, "/v2/webhooks", { url });
  expect(response.status).toBe(201);
  return (await response.json()) as { id: number; secret: string };
};

test("a ping answers the receiver's status and time, never its body; a job's deliveries show none of it either", async () => {
  const environment = await server.addEnvironment("ping-body");
  const hook = await subscribe(environment.base, environment.key, `${receiver.url}/body`);
  const response = await post(environment.base, environment.key, `/v2/webhooks/${hook.id}/test`);
  expect(response.status).toBe(200);
  const text = await response.text();
  expect(JSON.parse(text)).toEqual({ delivered: false, messageId: expect.stringMatching(/^msg_/), status: 500, error: "answered 500 Internal Server Error", durationMs: expect.any(Number) });
  expect(text).not.toContain("hunter2");

  const job = await importAndWait(environment.base, "subareas", environment.key, [{ id: "north", name: "North" }]);
  await receiver.waitFor(1, (message) => message.body.data.id === job.id && message.path === "/body");
  let listed = "";
  for (let waited = 0; !listed.includes('"attempts":[{'); waited += 20) {
    expect(waited).toBeLessThan(10_000);
    await Bun.sleep(20);
    listed = await (await fetch(`${environment.base}/v2/status/${job.id}/deliveries`, { headers: { "api-key": environment.key } })).text();
  }
  const [delivery] = (JSON.parse(listed) as { items: Array<{ attempts: Array<Record<string, unknown>> }> }).items;
  expect(delivery!.attempts[0]).toEqual({ attempt: 1, at: expect.any(String), status: 500, error: "answered 500 Internal Server Error", durationMs: expect.any(Number) });
  expect(listed).not.toContain("hunter2");
}, 30_000);

test(`pings are limited per environment: beyond ${pingsPerMinute} a minute, 429 with Retry-After as Problem Details; another environment still pings`, async () => {
  const one = await server.addEnvironment("ping-one");
  const two = await server.addEnvironment("ping-two");
  const hookOne = await subscribe(one.base, one.key, `${receiver.url}/one`);
  const hookTwo = await subscribe(two.base, two.key, `${receiver.url}/two`);
  const pingsToOne = () => receiver.received.filter((message) => message.path === "/one").length;
  for (let i = 0; i < pingsPerMinute; i++) expect((await post(one.base, one.key, `/v2/webhooks/${hookOne.id}/test`)).status).toBe(200);
  const refused = await post(one.base, one.key, `/v2/webhooks/${hookOne.id}/test`);
  expect(refused.status).toBe(429);
  expect(refused.headers.get("content-type")).toStartWith("application/problem+json");
  const wait = Number(refused.headers.get("retry-after"));
  expect(wait).toBeGreaterThanOrEqual(1);
  expect(wait).toBeLessThanOrEqual(60);
  expect(await refused.json()).toMatchObject({ status: 429, title: "Too Many Requests", detail: expect.stringContaining(`${pingsPerMinute} test pings in the last minute`) });
  // The refused ping sent nothing.
  expect(pingsToOne()).toBe(pingsPerMinute);
  expect((await post(two.base, two.key, `/v2/webhooks/${hookTwo.id}/test`)).status).toBe(200);
});

test("a ping to a destination refused after DNS says it is not allowed and how to allow it, not what the name resolves to; the log has that", async () => {
  // Subscribed while the operator allowed the name; pinged after a restart with a list that allows any name but not loopback.
  const dataDir = tempDir();
  const database = testBackend === "postgres" ? await freshPostgresDatabase() : undefined;
  const before = await startTestServer({ webhookAllow: parseWebhookAllow("localhost"), dataDir, databaseUrl: database?.url });
  const hook = await subscribe(before.base, before.key, `http://localhost:${receiver.port}/by-name`);
  // Stopped, not closed: close would remove what the next server starts on.
  stopChecking(before.url);
  await before.stop();
  const after = await startTestServer({ webhookAllow: parseWebhookAllow("*"), dataDir, databaseUrl: database?.url });
  try {
    const response = await post(after.base, before.key, `/v2/webhooks/${hook.id}/test`);
    expect(response.status).toBe(200);
    const ping = (await response.json()) as { delivered: boolean; status: number | null; error: string };
    expect(ping).toMatchObject({ delivered: false, status: null });
    expect(ping.error).toBe(
      `http://localhost:${receiver.port} is not allowed: localhost resolves to an address outside --webhook-allow (the operator's list of webhook destinations). If it should receive webhooks, the operator can allow the name or its addresses with --webhook-allow`,
    );
    expect(after.logs).toContainEqual(expect.objectContaining({ msg: "webhook ping refused", webhookId: hook.id, resolved: expect.stringMatching(/^localhost resolves to (127\.0\.0\.1|::1), a loopback address/) }));
  } finally {
    await after.close();
    await database?.drop();
  }
}, 30_000);
