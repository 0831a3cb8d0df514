import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { openRequest, type OpenRequest, type RawResponse } from "../helpers/raw-http";
import { asset } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

/**
 * Request bodies in flight (DECISIONS 15): the server's budget (503), an environment's uploads at once and its share
 * of the budget (429), both before the body is read; 408 for a body that stalls or crawls; and every reservation
 * given back, whatever the request's fate. Small figures, so that each test takes a second or two.
 */

const megabyte = 1024 * 1024;
const maxBodyBytes = 4 * megabyte;
// An environment's share is half of it: one body at the hard limit.
const bodyBudgetBytes = 8 * megabyte;

type Environment = { slug: string; key: string; base: string };

const encode = (text: string) => new TextEncoder().encode(text);

/** A valid one-asset batch padded with trailing white space to exactly `bytes` bytes. */
function batchOfSize(bytes: number): Uint8Array<ArrayBuffer> {
  const json = JSON.stringify([asset(0)]);
  return new Uint8Array(encode(json + " ".repeat(bytes - json.length)));
}

const post = (environment: Environment, body: BodyInit) =>
  fetch(`${environment.base}/v2/assets`, { method: "POST", headers: { "api-key": environment.key, "content-type": "application/json" }, body });

/** The head of an import, with a declared length or (`"chunked"`) without; its body is written by the test. */
const head = (environment: Environment, length: number | "chunked") =>
  `POST /${environment.slug}/v2/assets HTTP/1.1\r\nHost: importd\r\nApi-Key: ${environment.key}\r\nContent-Type: application/json\r\n` +
  (length === "chunked" ? "Transfer-Encoding: chunked\r\n" : `Content-Length: ${length}\r\n`) +
  "\r\n";

/** One chunk of a chunked body. */
const chunk = (text: string) => `${text.length.toString(16)}\r\n${text}\r\n`;

/** Waits for `condition`, asking again every 20 ms; throws saying what it waited for. */
async function until(what: string, condition: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${what}`);
    await Bun.sleep(20);
  }
}

/**
 * A refusal before the body was read: Problem Details with Retry-After. The connection stays open (the server drops
 * the rest of the body as it comes), so that a client still sending gets the answer rather than a reset.
 */
function expectRefusedBeforeReading(answer: RawResponse, status: 429 | 503) {
  expect(answer.status).toBe(status);
  expect(answer.headers["content-type"]).toBe("application/problem+json");
  expect(answer.headers["retry-after"]).toBe("5");
  expect(answer.headers.connection).not.toBe("close");
  return JSON.parse(answer.body) as { status: number; title: string; detail: string };
}

describe("bodies in flight: the budget and each environment's share", () => {
  let server: TestServer;
  let a: Environment;
  let b: Environment;
  let c: Environment;
  const held: OpenRequest[] = [];

  beforeAll(async () => {
    // A stall of 30 s: the uploads the tests hold open are not cut off while they look.
    server = await startTestServer({ maxBodyBytes, bodyBudgetBytes, uploadsPerEnvironment: 2, bodyStallSeconds: 30, bodyMinBytesPerSecond: 1024 });
    [a, b, c] = (await Promise.all(["env-a", "env-b", "env-c"].map((slug) => server.addEnvironment(slug)))) as [Environment, Environment, Environment];
  });
  afterAll(async () => {
    for (const request of held) request.close();
    await server.close();
  });

  /** Waits until the server holds exactly `bytes` of request bodies in flight. */
  const reserved = (bytes: number) => until(`${bytes} bytes of bodies in flight`, () => server.bodiesInFlight().bytes === bytes);

  /** Opens an upload that declares `bytes`, sends a little of it and stalls, once the server has reserved it. */
  async function hold(environment: Environment, bytes: number): Promise<OpenRequest> {
    const before = server.bodiesInFlight().bytes;
    const request = await openRequest(server.port, head(environment, bytes));
    request.write(" ".repeat(100));
    held.push(request);
    await reserved(before + bytes);
    return request;
  }
  /** A request refused before its body: only its head is sent. */
  async function refusedHead(environment: Environment, bytes: number): Promise<RawResponse> {
    const request = await openRequest(server.port, head(environment, bytes));
    held.push(request);
    return request.response;
  }
  const releaseAll = () => held.splice(0).forEach((request) => request.close());

  /** Every reservation given back, and an upload at the hard limit 202: the environment's whole share is free. */
  async function shareIsFree(environment: Environment) {
    await reserved(0);
    expect((await post(environment, batchOfSize(maxBodyBytes))).status).toBe(202);
  }

  test("an upload whose Content-Length does not fit what is left of the budget gets 503 with Retry-After, before a byte of its body is sent", async () => {
    await hold(a, maxBodyBytes);
    await hold(b, maxBodyBytes);
    const problem = expectRefusedBeforeReading(await refusedHead(c, 1000), 503);
    expect(problem).toMatchObject({ status: 503, title: "Service Unavailable" });
    expect(problem.detail).toContain("request bodies in memory");
    expect(server.bodiesInFlight()).toEqual({ count: 2, bytes: bodyBudgetBytes });
    releaseAll();
    // Given back when their clients went away.
    await shareIsFree(c);
  });

  test("an environment's uploads over 64 KiB past --uploads-per-environment get 429 with Retry-After before their body is read; another environment's import is 202 meanwhile", async () => {
    await hold(a, 100_000);
    await hold(a, 100_000);
    const problem = expectRefusedBeforeReading(await refusedHead(a, 100_000), 429);
    expect(problem.detail).toContain("2 request bodies in flight");
    expect((await post(b, batchOfSize(maxBodyBytes))).status).toBe(202);
    // Small bodies are not counted: many clients of one environment sending one-record jobs at once are not an attack.
    const small = await Promise.all(Array.from({ length: 8 }, () => post(a, batchOfSize(1000))));
    expect(small.map((response) => response.status)).toEqual(Array(8).fill(202));
    releaseAll();
    await shareIsFree(a);
  });

  test("an environment's bodies in flight may not pass half the budget (429), and leave the other half to the others", async () => {
    await hold(a, 3 * megabyte);
    expect(expectRefusedBeforeReading(await refusedHead(a, 2 * megabyte), 429).detail).toContain(`pass ${bodyBudgetBytes / 2} bytes`);
    expect((await post(b, batchOfSize(maxBodyBytes))).status).toBe(202);
    releaseAll();
    await shareIsFree(a);
  });

  test("a chunked body reserves as it arrives, and is cut off with 503 when the budget runs out on the way", async () => {
    await hold(b, maxBodyBytes);
    await hold(c, 3 * megabyte);
    // 1 MB of the budget is left: a chunked body passes it on its way to 2 MB.
    const chunked = await openRequest(server.port, head(a, "chunked"));
    held.push(chunked);
    const piece = " ".repeat(64 * 1024);
    // All of it, as a client that reads no answer before it has sent its body: the 503 still reaches it.
    for (let sent = 0; sent < 2 * megabyte; sent += piece.length) await chunked.write(chunk(piece));
    await chunked.write("0\r\n\r\n");
    expectRefusedBeforeReading(await chunked.response, 503);
    releaseAll();
    await shareIsFree(a);
  });

  test("the reservation is given back after a 400, a 413 and a client gone mid-body: an upload at the hard limit is 202 each time", async () => {
    // 400: a body of the hard limit that is not a batch.
    const invalid = await post(a, encode(`{"not": "an array"}${" ".repeat(maxBodyBytes - 19)}`));
    expect(invalid.status).toBe(400);
    await shareIsFree(a);
    // 413: a chunked body that passes the limit after it has reserved up to it.
    const tooLarge = await fetch(`${a.base}/v2/assets`, {
      method: "POST",
      headers: { "api-key": a.key, "content-type": "application/json" },
      body: new Blob([new Uint8Array(maxBodyBytes + 100 * 1024).fill(0x20)]).stream(),
      duplex: "half",
    } as RequestInit);
    expect(tooLarge.status).toBe(413);
    await shareIsFree(a);
    // The client goes away with half its body sent, in one go and as a stream.
    for (const length of [maxBodyBytes, "chunked"] as const) {
      const gone = await openRequest(server.port, head(a, length));
      await gone.write(length === "chunked" ? chunk(" ".repeat(megabyte)) : " ".repeat(maxBodyBytes / 2));
      await until(`env-a's ${length} upload to be in flight`, () => server.bodiesInFlight().count === 1);
      gone.close();
      await shareIsFree(a);
    }
  });

  test("a webhook subscription's body counts in the environment's share", async () => {
    await hold(a, maxBodyBytes);
    const subscription = await fetch(`${a.base}/v2/webhooks`, {
      method: "POST",
      headers: { "api-key": a.key, "content-type": "application/json" },
      body: JSON.stringify({ url: "https://hooks.example.com/importd" }),
    });
    expect(subscription.status).toBe(429);
    expect(subscription.headers.get("retry-after")).toBe("5");
    releaseAll();
    await shareIsFree(a);
  });
});

describe("408 for a body that stalls or crawls", () => {
  let server: TestServer;
  let a: Environment;
  const stallSeconds = 1;
  const minBytesPerSecond = 64 * 1024;

  beforeAll(async () => {
    server = await startTestServer({ maxBodyBytes, bodyBudgetBytes, uploadsPerEnvironment: 2, bodyStallSeconds: stallSeconds, bodyMinBytesPerSecond: minBytesPerSecond });
    a = await server.addEnvironment("env-a");
  });
  afterAll(() => server.close());

  /** Problem Details 408, the connection closed after it, within `withinMs` of the start; then the share is free again. */
  async function expect408(request: OpenRequest, startedAt: number, withinMs: number, detail: string) {
    const answer = await request.answer;
    const tookMs = Date.now() - startedAt;
    expect(answer.status).toBe(408);
    expect(answer.headers["content-type"]).toBe("application/problem+json");
    expect(answer.headers.connection).toBe("close");
    const problem = JSON.parse(answer.body) as { title: string; detail: string };
    expect(problem.title).toBe("Request Timeout");
    expect(problem.detail).toContain(detail);
    expect(tookMs).toBeLessThan(withinMs);
    // Given back: nothing is reserved, and an upload at the hard limit is 202.
    await until("every reservation to be given back", () => server.bodiesInFlight().bytes === 0);
    expect((await post(a, batchOfSize(maxBodyBytes))).status).toBe(202);
  }

  test("a declared body that stops arriving gets 408 after --body-stall-seconds (read in one go: plus its length at the minimum rate)", async () => {
    const startedAt = Date.now();
    const request = await openRequest(server.port, head(a, 16 * 1024));
    request.write(" ".repeat(1000));
    // 1 s, plus 16 KiB at 64 KiB/s.
    await expect408(request, startedAt, 1250 + 3000, "had not all arrived after 2 seconds");
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(1250);
  });

  test("a chunked body that stops arriving gets 408 after --body-stall-seconds", async () => {
    const startedAt = Date.now();
    const request = await openRequest(server.port, head(a, "chunked"));
    // A second's worth at the minimum rate: the body is not behind it before it has stalled for a second.
    request.write(chunk(" ".repeat(minBytesPerSecond)));
    await expect408(request, startedAt, 1000 * stallSeconds + 3000, `No byte of the request body arrived for ${stallSeconds} seconds`);
  });

  test("a chunked body that crawls (a few bytes every 100 ms) gets 408 once the grace is over, though it never stalls", async () => {
    const startedAt = Date.now();
    const request = await openRequest(server.port, head(a, "chunked"));
    const trickle = setInterval(() => request.write(chunk("          ")), 100);
    try {
      await expect408(request, startedAt, 1000 * stallSeconds + 3000, `under ${minBytesPerSecond} bytes a second`);
    } finally {
      clearInterval(trickle);
    }
  });

  test("a declared body that crawls gets 408 when a body at the minimum rate would have arrived", async () => {
    const startedAt = Date.now();
    // 1 s of grace plus 128 KiB at 64 KiB/s: 3 s; at 1 KB every 100 ms it would take 13 s.
    const request = await openRequest(server.port, head(a, 128 * 1024));
    const trickle = setInterval(() => request.write(" ".repeat(1000)), 100);
    try {
      await expect408(request, startedAt, 3000 + 3000, "had not all arrived after 3 seconds");
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(3000);
    } finally {
      clearInterval(trickle);
    }
  });

  test("uploads at the usual speed are not cut off, declared or chunked", async () => {
    expect((await post(a, batchOfSize(maxBodyBytes))).status).toBe(202);
    const chunked = await fetch(`${a.base}/v2/assets`, {
      method: "POST",
      headers: { "api-key": a.key, "content-type": "application/json" },
      body: new Blob([batchOfSize(maxBodyBytes)]).stream(),
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(202);
  });
});
