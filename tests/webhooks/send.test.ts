import { afterEach, describe, expect, test } from "bun:test";
import { Webhook } from "standardwebhooks";
import { parseWebhookAllow } from "../../src/net/allow-list";
import { maxResponseBytes, sendWebhook, type SendOptions } from "../../src/webhooks/send";
import { testAuthority } from "../helpers/tls";

type Received = { host: string | null; headers: Record<string, string>; body: string };
type Receiver = { port: number; received: Received[]; arrived: Promise<void> };

const servers: Array<{ stop(closeActiveConnections?: boolean): unknown }> = [];
afterEach(() => {
  // Forcefully: some receivers are meant to hang, and their connections must not outlive the test.
  for (const server of servers.splice(0)) server.stop(true);
});

/** A webhook receiver on 127.0.0.1 that records every request; `arrived` settles when the first one has been read. */
function receiver(answer: (request: Request) => Response | Promise<Response>, tls?: { cert: string; key: string }): Receiver {
  const received: Received[] = [];
  const arrival = Promise.withResolvers<void>();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls,
    async fetch(request) {
      received.push({ host: request.headers.get("host"), headers: Object.fromEntries(request.headers), body: await request.text() });
      arrival.resolve();
      return answer(request);
    },
  });
  servers.push(server);
  return { port: server.port!, received, arrived: arrival.promise };
}

const newSecret = () => `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(24))).toString("base64")}`;
const secret = newSecret();
const body = JSON.stringify({ type: "job.succeeded", timestamp: "2030-01-01T00:00:00.000Z", data: { id: "job-1" } });
const loopback = parseWebhookAllow("127.0.0.1/32,::1/128");

const send = (url: string, options: Partial<SendOptions> = {}) => sendWebhook({ url, messageId: "msg_2xv8k", body, secret, allow: loopback, ...options });

/** What a receiver does with Standard Webhooks: throws unless the signature is the secret's, for this id, time and body. */
const verify = (request: Received, withSecret = secret) => new Webhook(withSecret).verify(request.body, request.headers);

describe("sendWebhook: one signed attempt", () => {
  test("a 2xx is delivered: the receiver gets the body signed with the subscription's secret under the event's id", async () => {
    const { port, received } = receiver(() => new Response("thanks", { status: 202 }));
    const at = new Date(Date.now() - 90_000);
    const attempt = await send(`http://127.0.0.1:${port}/hooks?source=importd`, { now: () => at });

    expect(attempt).toMatchObject({ delivered: true, status: 202, gone: false, at: at.toISOString() });
    expect(attempt.error).toBeUndefined();
    expect(attempt.durationMs).toBeGreaterThanOrEqual(0);
    expect(received).toHaveLength(1);
    const [request] = received;
    expect(request!.body).toBe(body);
    expect(request!.headers).toMatchObject({
      "content-type": "application/json",
      "user-agent": "importd-webhooks",
      "webhook-id": "msg_2xv8k",
      "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    });
    expect(request!.headers["webhook-signature"]).toStartWith("v1,");
    expect(verify(request!)).toEqual(JSON.parse(body));
    expect(() => verify(request!, newSecret())).toThrow("No matching signature found");
  });

  test("410 Gone is not delivered and says the receiver wants no more", async () => {
    const { port } = receiver(() => new Response("unsubscribed", { status: 410 }));
    expect(await send(`http://127.0.0.1:${port}/`)).toMatchObject({ delivered: false, gone: true, status: 410, error: "answered 410 Gone" });
  });

  test("a 500 is not delivered; its status is kept, and nothing of its body", async () => {
    const { port, received } = receiver(() => new Response("database down", { status: 500 }));
    const attempt = await send(`http://127.0.0.1:${port}/`);
    expect(attempt).toMatchObject({ delivered: false, gone: false, status: 500, error: "answered 500 Internal Server Error" });
    expect(JSON.stringify(attempt)).not.toContain("database down");
    expect(() => verify(received[0]!)).not.toThrow();
  });

  test("a redirect is a failed attempt and is never followed", async () => {
    const elsewhere = receiver(() => new Response("should not be reached"));
    for (const status of [302, 307]) {
      const { port, received } = receiver(() => new Response(null, { status, headers: { location: `http://127.0.0.1:${elsewhere.port}/collect` } }));
      expect(await send(`http://127.0.0.1:${port}/`)).toMatchObject({
        delivered: false,
        status,
        error: `redirected to http://127.0.0.1:${elsewhere.port}/collect: redirects are not followed`,
      });
      expect(received).toHaveLength(1);
    }
    const relative = receiver(() => new Response(null, { status: 301, headers: { location: "/v2/hooks" } }));
    expect((await send(`http://127.0.0.1:${relative.port}/old`)).error).toBe(`redirected to http://127.0.0.1:${relative.port}/v2/hooks: redirects are not followed`);
    expect(elsewhere.received).toHaveLength(0);
  });

  test("a receiver that never answers ends the attempt at the time limit", async () => {
    const { port, arrived } = receiver(() => new Promise<Response>(() => {}));
    const attempt = await send(`http://127.0.0.1:${port}/`, { timeoutMs: 500 });
    await arrived;
    expect(attempt).toMatchObject({ delivered: false, error: "no answer within 500 ms" });
    expect(attempt.status).toBeUndefined();
    expect(attempt.durationMs).toBeGreaterThanOrEqual(450);
    expect(attempt.durationMs).toBeLessThan(5_000);
  });

  test("a receiver that sends its headers and then stalls ends the attempt at the time limit too", async () => {
    const { port } = receiver(() => new Response(new ReadableStream({ start: (controller) => controller.enqueue(new TextEncoder().encode("working on it")) })));
    const attempt = await send(`http://127.0.0.1:${port}/`, { timeoutMs: 500 });
    expect(attempt).toMatchObject({ delivered: false, status: 200, error: "answered 200 OK, but its body did not end within 500 ms" });
    expect(attempt.durationMs).toBeLessThan(5_000);
  });

  test(`only the first ${maxResponseBytes} bytes of an answer are read, and none is kept`, async () => {
    const long = receiver(() => new Response("x".repeat(5 * 1024)));
    const attempt = await send(`http://127.0.0.1:${long.port}/`);
    expect(attempt).toMatchObject({ delivered: true, status: 200 });
    expect(JSON.stringify(attempt)).not.toContain("xxx");

    // An endless answer: the rest is cancelled, not waited for.
    const endless = receiver(() => new Response(new ReadableStream({ pull: (controller) => controller.enqueue(new Uint8Array(64 * 1024).fill(0x61)) })));
    const cut = await send(`http://127.0.0.1:${endless.port}/`, { timeoutMs: 5_000 });
    expect(cut).toMatchObject({ delivered: true, status: 200 });
  });

  test("nothing listening: connection refused, as an attempt, not an exception", async () => {
    const closed = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() });
    const port = closed.port;
    closed.stop(true);
    expect(await send(`http://127.0.0.1:${port}/`)).toMatchObject({ delivered: false, gone: false, error: "connection refused: nothing listens at that address and port" });
  });

  test("what cannot be sent at all is an attempt that says why", async () => {
    expect(await send("not a url")).toMatchObject({ delivered: false, error: "'not a url' is not a URL: give an absolute http or https URL, such as https://hooks.example.com/importd" });
    expect((await send("http://127.0.0.1:9/", { secret: "" })).error).toStartWith("the subscription's signing secret cannot sign");
    expect((await send("http://127.0.0.1:9/", { allow: parseWebhookAllow("") })).error).toStartWith("webhooks are off on this server");
  });
});

describe("sendWebhook: only where --webhook-allow says, to the address that was checked", () => {
  test("localhost allowed by name is delivered (RFC 6761 keeps it on loopback); allowed through * only, it is refused and nothing reaches the receiver", async () => {
    const { port, received } = receiver(() => new Response("ok"));
    expect(await send(`http://localhost:${port}/`, { allow: parseWebhookAllow("localhost") })).toMatchObject({ delivered: true, status: 200 });
    expect(received).toHaveLength(1);
    const attempt = await send(`http://localhost:${port}/`, { allow: parseWebhookAllow("*") });
    expect(attempt.delivered).toBe(false);
    expect(attempt.error).toStartWith(`http://localhost:${port} is not allowed: localhost resolves to an address outside --webhook-allow`);
    expect(attempt.resolved).toMatch(/^localhost resolves to (127\.0\.0\.1|::1), a loopback address, which is not in --webhook-allow/);
    expect(received).toHaveLength(1);
  });

  test("localhost allowed by its addresses' ranges is delivered", async () => {
    const { port, received } = receiver(() => new Response("ok"));
    expect(await send(`http://localhost:${port}/`, { allow: parseWebhookAllow("127.0.0.1/32,::1/128") })).toMatchObject({ delivered: true, status: 200 });
    expect(received[0]!.host).toBe(`localhost:${port}`);
    expect(() => verify(received[0]!)).not.toThrow();
  });

  test("a URL outside the list sends nothing and asks DNS nothing", async () => {
    const { port, received } = receiver(() => new Response("ok"));
    let lookups = 0;
    const lookup = async () => (lookups++, [{ address: "127.0.0.1", family: 4 }]);
    const attempt = await send(`http://receiver.test:${port}/`, { allow: parseWebhookAllow("hooks.example.com"), lookup });
    expect(attempt.error).toBe(`http://receiver.test:${port} is not allowed: receiver.test is not in --webhook-allow (the operator's list of webhook destinations)`);
    expect(lookups).toBe(0);
    expect(received).toHaveLength(0);
  });

  test("the request goes to the address that was checked, the name only in Host: DNS is asked once", async () => {
    const { port, received } = receiver(() => new Response("ok"));
    const asked: string[] = [];
    // receiver.test exists only in this resolver: were the name resolved again to connect, the attempt would fail.
    const lookup = async (name: string) => (asked.push(name), [{ address: "127.0.0.1", family: 4 }]);
    expect(await send(`http://receiver.test:${port}/in?x=1`, { lookup })).toMatchObject({ delivered: true, status: 200 });
    expect(asked).toEqual(["receiver.test"]);
    expect(received[0]!.host).toBe(`receiver.test:${port}`);
  });

  test("an IPv6 address that leads into the appliance's network is skipped for the name's next, allowed address; alone, nothing is sent", async () => {
    const { port, received } = receiver(() => new Response("ok"));
    // 2002:7f00:1:: is 6to4 around 127.0.0.1; fec0::1 site-local; 2001::1 Teredo; 64:ff9b:1::1 local-use NAT64.
    const forbidden = ["2002:7f00:1::", "fec0::1", "2001::1", "64:ff9b:1::1"].map((address) => ({ address, family: 6 }));
    const lookup = async () => [...forbidden, { address: "127.0.0.1", family: 4 }];
    expect(await send(`http://receiver.test:${port}/`, { lookup })).toMatchObject({ delivered: true, status: 200 });
    expect(received).toHaveLength(1);
    const alone = await send(`http://receiver.test:${port}/`, { lookup: async () => forbidden, allow: parseWebhookAllow("*") });
    expect(alone).toMatchObject({ delivered: false, error: expect.not.stringContaining("2002"), resolved: expect.stringContaining("receiver.test resolves to 2002:7f00:1::, a 6to4 address leading to a loopback address") });
    expect(received).toHaveLength(1);
  });

  test("an address that refuses the connection gives way to the name's next address", async () => {
    const { port, received } = receiver(() => new Response("ok"));
    const lookup = async () => [
      { address: "::1", family: 6 },
      { address: "127.0.0.1", family: 4 },
    ];
    expect(await send(`http://receiver.test:${port}/`, { lookup })).toMatchObject({ delivered: true, status: 200 });
    expect(received).toHaveLength(1);
  });

  test("DNS that does not answer ends the attempt at the time limit", async () => {
    const attempt = await send("http://slow.test/", { lookup: () => new Promise(() => {}), timeoutMs: 300 });
    expect(attempt).toMatchObject({ delivered: false, error: "looking up slow.test took longer than 300 ms" });
  });
});

const authority = await testAuthority("webhook receivers");
const forLocalhost = await authority.issue(["localhost"]);
const forOther = await authority.issue(["other.example"]);

describe("sendWebhook over https: the certificate must name the URL's host", () => {
  test("delivered to https://localhost through its checked address, the certificate checked against the name", async () => {
    const { port, received } = receiver(() => new Response("ok"), forLocalhost);
    expect(await send(`https://localhost:${port}/hooks`, { ca: authority.cert })).toMatchObject({ delivered: true, status: 200 });
    expect(received[0]!.host).toBe(`localhost:${port}`);
    expect(() => verify(received[0]!)).not.toThrow();
  });

  test("a certificate for another name fails, and the receiver gets nothing", async () => {
    const { port, received } = receiver(() => new Response("ok"), forOther);
    const attempt = await send(`https://localhost:${port}/hooks`, { ca: authority.cert });
    expect(attempt.delivered).toBe(false);
    expect(attempt.error).toStartWith("its TLS certificate is not for localhost");
    expect(received).toHaveLength(0);
  });

  test("the same address and port, reached under a name its certificate lacks, fails, even right after a delivery", async () => {
    const { port, received } = receiver(() => new Response("ok"), forLocalhost);
    const lookup = async () => [{ address: "127.0.0.1", family: 4 }];
    expect((await send(`https://localhost:${port}/`, { ca: authority.cert, lookup })).delivered).toBe(true);
    const attempt = await send(`https://webhooks.test:${port}/`, { ca: authority.cert, lookup });
    expect(attempt.delivered).toBe(false);
    expect(attempt.error).toStartWith("its TLS certificate is not for webhooks.test");
    expect(received).toHaveLength(1);
  });

  test("a certificate from an authority not trusted fails", async () => {
    const { port, received } = receiver(() => new Response("ok"), forLocalhost);
    const attempt = await send(`https://localhost:${port}/`);
    expect(attempt.delivered).toBe(false);
    expect(attempt.error).toStartWith("its TLS certificate is not signed by an authority this server trusts");
    expect(received).toHaveLength(0);
  });
});
