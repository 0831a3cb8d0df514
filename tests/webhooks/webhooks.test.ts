import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { createClient } from "../../src/client";
import { parseWebhookAllow } from "../../src/net/allow-list";
import { importAndWait, waitForJob } from "../helpers/api";
import { Receiver } from "../helpers/receiver";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";
import { until } from "../helpers/until";

// Webhooks (DECISIONS 10) through a real server and a real receiver in this process: every message's signature is
// checked with the standardwebhooks package. The retry schedule runs 500 times faster (IMPORTD_TEST_WEBHOOK_RETRY_SCALE's
// hook), so that a receiver away for a second sees several retries.

let server: TestServer;
let receiver: Receiver;
beforeAll(async () => {
  receiver = await Receiver.start();
  server = await startTestServer({ webhookAllow: parseWebhookAllow("127.0.0.1/32,::1/128"), testHooks: { webhookRetryScale: 0.002 } });
  await seedReferenceData(server.base, server.key);
});
afterAll(async () => {
  await server.close();
  await receiver.stop();
});
afterEach(async () => {
  for (const { id } of await list()) await send(`/v2/webhooks/${id}`, { method: "DELETE" });
  receiver.answer = () => new Response("thanks");
});

const send = (path: string, init: RequestInit = {}, base = server.base, key = server.key) =>
  fetch(`${base}${path}`, { ...init, headers: { "api-key": key, "content-type": "application/json", ...(init.headers as Record<string, string>) } });
const subscribe = async (url: string, events?: string[], environment?: { base: string; key: string }) => {
  const response = await send("/v2/webhooks", { method: "POST", body: JSON.stringify({ url, events }) }, environment?.base, environment?.key);
  return { status: response.status, location: response.headers.get("location"), body: (await response.json()) as Record<string, unknown> & { id: number; secret: string } };
};
const subscribed = async (events?: string[], path = "/hook") => {
  const { status, body } = await subscribe(`${receiver.url}${path}`, events);
  expect(status).toBe(201);
  receiver.secret = body.secret;
  return body;
};
const list = async () =>
  ((await (await send("/v2/webhooks")).json()) as { items: Array<{ id: number; url: string; events: string[]; createdAt: string; disabledAt: string | null; disabledReason: string | null }> }).items;
const deliveries = async (jobId: number) =>
  ((await (await send(`/v2/status/${jobId}/deliveries`)).json()) as { items: Array<{ messageId: string; event: string; status: string; attempts: Array<{ status: number | null; error: string | null }> }> }).items;
const status = async (jobId: number) => (await send(`/v2/status/${jobId}`)).json();

describe("subscriptions", () => {
  test("POST /v2/webhooks answers 201 with the subscription and its secret, once; GET lists it without; DELETE removes it", async () => {
    const { status: code, location, body } = await subscribe(`${receiver.url}/a`, ["job.failed", "job.succeeded"]);
    expect(code).toBe(201);
    expect(location).toBe(`/default/v2/webhooks/${body.id}`);
    expect(body).toMatchObject({ url: `${receiver.url}/a`, events: ["job.failed", "job.succeeded"], disabledAt: null, disabledReason: null });
    expect(body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const listed = await list();
    expect(listed).toEqual([{ id: body.id, url: `${receiver.url}/a`, events: ["job.failed", "job.succeeded"], createdAt: expect.any(String), disabledAt: null, disabledReason: null }]);
    // Another environment sees none of it.
    const other = await server.addEnvironment("webhooks-other");
    expect(((await (await send("/v2/webhooks", {}, other.base, other.key)).json()) as { items: unknown[] }).items).toEqual([]);
    expect((await send(`/v2/webhooks/${body.id}`, { method: "DELETE" }, other.base, other.key)).status).toBe(404);
    expect((await send(`/v2/webhooks/${body.id}`, { method: "DELETE" })).status).toBe(204);
    expect(await list()).toEqual([]);
    expect((await send(`/v2/webhooks/${body.id}`, { method: "DELETE" })).status).toBe(404);
  });

  test("a bad body is a 400 naming the field; a URL outside --webhook-allow, or a name that resolves into a forbidden range, a 422", async () => {
    const problem = async (body: unknown) => {
      const response = await send("/v2/webhooks", { method: "POST", body: JSON.stringify(body) });
      return { status: response.status, errors: ((await response.json()) as { errors?: Record<string, string[]> }).errors };
    };
    expect(await problem({})).toMatchObject({ status: 400, errors: { url: [expect.stringContaining("'Url' must be a non-empty string")] } });
    expect(await problem({ url: receiver.url, events: ["job.exploded"] })).toMatchObject({ status: 400, errors: { events: [expect.stringContaining("job.succeeded, job.partially_succeeded, job.failed, job.canceled")] } });
    expect(await problem({ url: receiver.url, events: [] })).toMatchObject({ status: 400 });
    expect(await problem({ url: "http://10.0.0.5/hook" })).toMatchObject({ status: 422, errors: { url: [expect.stringContaining("10.0.0.5 is not in --webhook-allow")] } });
    expect(await problem({ url: "http://169.254.169.254/latest/meta-data" })).toMatchObject({ status: 422 });
    expect(await problem({ url: "ftp://127.0.0.1/x" })).toMatchObject({ status: 422, errors: { url: [expect.stringContaining("only http and https")] } });
    expect(await problem({ url: "not a url" })).toMatchObject({ status: 422 });
    expect(await list()).toEqual([]);

    // A server that allows the name localhost delivers to it (RFC 6761 keeps it on loopback); one that allows any
    // name (*) does not let a subscriber reach the appliance's loopback by that name.
    const byName = await startTestServer({ webhookAllow: parseWebhookAllow("localhost") });
    try {
      const subscribe = { method: "POST", headers: { "api-key": byName.key, "content-type": "application/json" }, body: JSON.stringify({ url: `http://localhost:${receiver.port}/by-name` }) };
      const response = await fetch(`${byName.base}/v2/webhooks`, subscribe);
      expect(response.status).toBe(201);
      const hook = (await response.json()) as { id: number };
      const ping = await fetch(`${byName.base}/v2/webhooks/${hook.id}/test`, { method: "POST", headers: { "api-key": byName.key } });
      expect(await ping.json()).toMatchObject({ delivered: true, status: 200 });
    } finally {
      await byName.close();
    }
    const anyName = await startTestServer({ webhookAllow: parseWebhookAllow("*") });
    try {
      const response = await fetch(`${anyName.base}/v2/webhooks`, { method: "POST", headers: { "api-key": anyName.key, "content-type": "application/json" }, body: JSON.stringify({ url: `http://localhost:${receiver.port}/` }) });
      expect(response.status).toBe(422);
      // Refused, without what the name resolves to (the server's log has it).
      const detail = JSON.stringify(await response.json());
      expect(detail).toContain("localhost resolves to an address outside --webhook-allow");
      expect(detail).not.toMatch(/127\.0\.0\.1|::1|loopback/);
      expect(anyName.logs).toContainEqual(expect.objectContaining({ msg: "webhook subscription refused", resolved: expect.stringMatching(/^localhost resolves to (127\.0\.0\.1|::1), a loopback address/) }));
    } finally {
      await anyName.close();
    }
    // And one that allows nothing: webhooks are off.
    const off = await startTestServer();
    try {
      const response = await fetch(`${off.base}/v2/webhooks`, { method: "POST", headers: { "api-key": off.key, "content-type": "application/json" }, body: JSON.stringify({ url: receiver.url }) });
      expect(response.status).toBe(422);
      expect(((await response.json()) as { detail: string }).detail).toContain("webhooks are off on this server");
    } finally {
      await off.close();
    }
  });
});

describe("deliveries", () => {
  test("every end of a job arrives signed, with the job document as GET /v2/status gives it: succeeded, partially succeeded, failed, canceled; and a ping", async () => {
    const hook = await subscribed();
    const before = receiver.received.length;
    const succeeded = await importAndWait(server.base, "assets", server.key, [asset(1)]);
    const partial = await importAndWait(server.base, "assets", server.key, [asset(2), asset(3, { subAreaId: "nowhere" })]);
    const failed = await importAndWait(server.base, "assets", server.key, [asset(4), asset(4)]);
    const parked = await server.parkJob("default", "until released");
    expect((await send(`/v2/status/${parked.id}/cancel`, { method: "POST" })).status).toBe(200);
    await parked.release();
    const messages = (await receiver.waitFor(before + 4)).slice(before);
    expect(messages.every((message) => message.verified)).toBe(true);
    const byJob = new Map(messages.map((message) => [message.body.data.id as number, message]));
    for (const [job, type] of [[succeeded.id, "job.succeeded"], [partial.id, "job.partially_succeeded"], [failed.id, "job.failed"], [parked.id, "job.canceled"]] as const) {
      const message = byJob.get(job)!;
      expect({ job, type: message.body.type }).toEqual({ job, type });
      expect(message.body.data).toEqual(await status(job));
      expect(message.body.timestamp).toBe(message.body.data.completedAt as string);
      expect(message.id).toMatch(/^msg_[0-9a-f]{32}$/);
      expect(await deliveries(job)).toEqual([expect.objectContaining({ messageId: message.id, event: type, status: "delivered", attempts: [expect.objectContaining({ status: 200, error: null })] })]);
    }

    const ping = (await (await send(`/v2/webhooks/${hook.id}/test`, { method: "POST" })).json()) as { delivered: boolean; messageId: string; status: number };
    expect(ping).toMatchObject({ delivered: true, status: 200 });
    const [pinged] = await receiver.waitFor(1, (message) => message.id === ping.messageId);
    expect(pinged).toMatchObject({ verified: true, body: { type: "ping", data: { webhookId: hook.id, url: `${receiver.url}/hook` } } });
  }, 60_000);

  test("a delete job's end and a mirror's completion's arrive as an import's do, the job document saying which operation: job.succeeded, and job.failed for a completion its limit stopped", async () => {
    // An environment of its own: the mirror deletes the assets its sync does not send, and the other tests' stay.
    const mirrored = await server.addEnvironment("webhooks-mirror");
    await seedReferenceData(mirrored.base, mirrored.key);
    const client = createClient({ baseUrl: mirrored.base, apiKey: mirrored.key });
    const { status: code, body: hook } = await subscribe(`${receiver.url}/mirror`, undefined, mirrored);
    expect(code).toBe(201);
    receiver.secret = hook.secret;
    await client.waitForJob((await client.importRecords("assets", Array.from({ length: 10 }, (_, i) => asset(500 + i)) as never)).id);

    const deleted = await client.waitForJob((await client.deleteRecords("assets", [asset(509).id])).id);
    const sync = await client.openSync("assets");
    await client.waitForJob((await client.importRecords("assets", Array.from({ length: 5 }, (_, i) => asset(500 + i)) as never, { sync: sync.id })).id);
    // 4 of the 9 assets left are not in the sync: more than the 10% a completion deletes by default.
    const stopped = await client.waitForJob((await client.completeSync(sync.id)).id);
    expect(stopped).toMatchObject({ operation: "syncCompletion", importJobStatus: "Failed", output: { deleted: 0 } });
    const completed = await client.waitForJob((await client.completeSync(sync.id, { maxDeletePercent: 50 })).id);
    expect(completed).toMatchObject({ operation: "syncCompletion", importJobStatus: "Succeeded", output: { deleted: 4 } });

    for (const [job, type, operation] of [[deleted, "job.succeeded", "delete"], [stopped, "job.failed", "syncCompletion"], [completed, "job.succeeded", "syncCompletion"]] as const) {
      const [message] = await receiver.waitFor(1, (one) => one.path === "/mirror" && one.body.data.id === job.id);
      expect(message!.verified).toBe(true);
      expect({ job: job.id, type: message!.body.type, operation: message!.body.data.operation }).toEqual({ job: job.id, type, operation });
      expect(message!.body.data).toEqual(await client.getJob(job.id));
      // The receiver has it before the dispatcher has stored the attempt.
      const stored = await until(() => client.jobDeliveries(job.id), { what: `job ${job.id}'s delivery stored as delivered`, holds: (found) => found[0]?.status === "delivered" });
      expect(stored).toEqual([expect.objectContaining({ messageId: message!.id, event: type, status: "delivered" })]);
    }
    await client.removeWebhook(hook.id);
  }, 60_000);

  test("only the events a subscription asked for", async () => {
    await subscribed(["job.failed"], "/failures");
    const ok = await importAndWait(server.base, "assets", server.key, [asset(10)]);
    const bad = await importAndWait(server.base, "assets", server.key, [asset(11), asset(11)]);
    await receiver.waitFor(1, (message) => message.path === "/failures" && message.body.data.id === bad.id);
    expect(await deliveries(ok.id)).toEqual([]);
  }, 30_000);

  test("a receiver that is down for a while gets every event once it is back, each under the webhook-id it had from the start", async () => {
    await subscribed(undefined, "/down");
    await receiver.down();
    const jobs = [await importAndWait(server.base, "assets", server.key, [asset(20)]), await importAndWait(server.base, "assets", server.key, [asset(21)])];
    // Tried and failed meanwhile, more than once.
    for (const job of jobs) {
      for (let waited = 0; (await deliveries(job.id))[0]!.attempts.length < 2; waited += 20) {
        expect(waited).toBeLessThan(10_000);
        await Bun.sleep(20);
      }
    }
    const ids = await Promise.all(jobs.map(async (job) => (await deliveries(job.id))[0]!));
    expect(ids.every((delivery) => delivery.status === "pending" && delivery.attempts.every((attempt) => attempt.status === null && attempt.error !== null))).toBe(true);
    receiver.up();
    const arrived = await receiver.waitFor(2, (message) => message.path === "/down");
    expect(arrived.map((message) => message.id).sort()).toEqual(ids.map((delivery) => delivery.messageId).sort());
    expect(arrived.every((message) => message.verified)).toBe(true);
    // Stored once the answer is in: the receiver may see the message a moment before.
    for (const job of jobs) {
      for (let waited = 0; (await deliveries(job.id))[0]!.status !== "delivered"; waited += 20) {
        expect(waited).toBeLessThan(10_000);
        await Bun.sleep(20);
      }
    }
  }, 60_000);

  test("410 Gone disables the subscription: later jobs send it nothing", async () => {
    const hook = await subscribed(undefined, "/gone");
    receiver.answer = (_, received) => new Response(received?.path === "/gone" ? "gone" : "thanks", { status: received?.path === "/gone" ? 410 : 200 });
    const first = await importAndWait(server.base, "assets", server.key, [asset(30)]);
    await receiver.waitFor(1, (message) => message.path === "/gone");
    for (let waited = 0; (await list()).find((webhook) => webhook.id === hook.id)!.disabledAt === null; waited += 20) {
      expect(waited).toBeLessThan(10_000);
      await Bun.sleep(20);
    }
    expect((await list()).find((webhook) => webhook.id === hook.id)!.disabledReason).toContain("410 Gone");
    expect(await deliveries(first.id)).toEqual([expect.objectContaining({ status: "failed", attempts: [{ attempt: 1, at: expect.any(String), status: 410, error: "answered 410 Gone", durationMs: expect.any(Number) }] })]);
    const later = await importAndWait(server.base, "assets", server.key, [asset(31)]);
    expect(await deliveries(later.id)).toEqual([]);
  }, 30_000);

  test("a redirect is not followed: the place it points to gets nothing, and the attempt says why", async () => {
    const elsewhere = await Receiver.start();
    try {
      await subscribed(undefined, "/moved");
      receiver.answer = (_, received) => (received?.path === "/moved" ? Response.redirect(`${elsewhere.url}/new`, 307) : new Response("thanks"));
      const job = await importAndWait(server.base, "assets", server.key, [asset(40)]);
      // Two attempts at least (the retries come 500 times sooner here, and a third may be in by the time it is read): each
      // answered 307, none followed.
      const [delivery] = await until(() => deliveries(job.id), { what: "the delivery's second attempt", holds: (found) => (found[0]?.attempts.length ?? 0) >= 2, deadlineMs: 30_000 });
      for (const attempt of delivery!.attempts) expect(attempt).toMatchObject({ status: 307, error: expect.stringContaining("redirects are not followed") });
      expect(elsewhere.received).toEqual([]);
    } finally {
      await elsewhere.stop();
    }
  }, 60_000);

  test("a receiver that hangs delays only its own deliveries: another subscription's arrive meanwhile, and so do the jobs", async () => {
    const hanging = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Promise<Response>(() => {}) });
    try {
      const stuck = await subscribe(`http://127.0.0.1:${hanging.port}/never`);
      expect(stuck.status).toBe(201);
      await subscribed(undefined, "/beside");
      const started = performance.now();
      const jobs: Array<{ id: number }> = [];
      for (let i = 0; i < 3; i++) jobs.push(await importAndWait(server.base, "assets", server.key, [asset(60 + i)]));
      await receiver.waitFor(3, (message) => message.path === "/beside" && jobs.some((job) => job.id === message.body.data.id));
      // Well within one attempt's 10 s on the hanging receiver.
      expect(performance.now() - started).toBeLessThan(5_000);
      const [held] = await deliveries(jobs[0]!.id).then((items) => items.filter((item) => item.status === "pending"));
      expect(held).toMatchObject({ status: "pending", attempts: [] });
    } finally {
      hanging.stop(true);
    }
  }, 30_000);

  test("a job's deliveries are its environment's only: another's key gets 404", async () => {
    await subscribed();
    const job = await importAndWait(server.base, "assets", server.key, [asset(50)]);
    await waitForJob(server.base, server.key, job.id);
    const other = await server.addEnvironment("webhooks-elsewhere");
    expect((await send(`/v2/status/${job.id}/deliveries`, {}, other.base, other.key)).status).toBe(404);
    expect((await send(`/v2/status/999999/deliveries`)).status).toBe(404);
  }, 30_000);
});
