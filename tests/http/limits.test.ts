import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { asset } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

/** 413 and 415 (DECISIONS section 3, spec 7.1 and 8), with a small limit so the bodies stay small. */

const maxBodyBytes = 1024 * 1024;

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ maxBodyBytes });
});
afterAll(() => server.close());

const encode = (text: string): Uint8Array<ArrayBuffer> => new Uint8Array(new TextEncoder().encode(text));

/** A valid one-asset batch padded with trailing white space to exactly `bytes` bytes. */
function batchOfSize(bytes: number): Uint8Array<ArrayBuffer> {
  const json = JSON.stringify([asset(0)]);
  return encode(json + " ".repeat(bytes - json.length));
}

/** A body sent with Transfer-Encoding: chunked (no Content-Length), in 64 KiB chunks. */
function chunked(bytes: Uint8Array): ReadableStream<Uint8Array> {
  let offset = 0;
  return new ReadableStream({
    pull(controller) {
      if (offset >= bytes.byteLength) return controller.close();
      controller.enqueue(bytes.slice(offset, offset + 64 * 1024));
      offset += 64 * 1024;
    },
  });
}

/** `key: null` sends no Api-Key header. */
function post(body: BodyInit, headers: Record<string, string>, key: string | null = server.key) {
  return fetch(`${server.base}/v2/assets`, {
    method: "POST",
    headers: { ...(key === null ? {} : { "api-key": key }), ...headers },
    body,
    ...(body instanceof ReadableStream ? { duplex: "half" } : {}),
  } as RequestInit);
}
const postJsonBytes = (body: BodyInit) => post(body, { "content-type": "application/json" });

async function expectProblem(response: Response, status: number, type: string, title: string) {
  expect(response.status).toBe(status);
  expect(response.headers.get("content-type")).toBe("application/problem+json");
  const problem = (await response.json()) as { type: string; title: string; status: number; detail: string };
  expect(problem).toMatchObject({ type, title, status });
  return problem;
}
const expect413 = (response: Response) =>
  expectProblem(response, 413, "https://tools.ietf.org/html/rfc9110#section-15.5.14", "Payload Too Large");
const expect415 = (response: Response) =>
  expectProblem(response, 415, "https://tools.ietf.org/html/rfc9110#section-15.5.16", "Unsupported Media Type");

describe("413 Payload Too Large", () => {
  test("answers 413 Problem Details when Content-Length exceeds the limit by one byte", async () => {
    const problem = await expect413(await postJsonBytes(batchOfSize(maxBodyBytes + 1)));
    expect(problem.detail).toContain(`${maxBodyBytes} bytes`);
    expect(problem.detail).toContain("Split the records into several requests");
  });

  test("answers 413 Problem Details for a chunked body with no Content-Length that passes the limit", async () => {
    const problem = await expect413(await postJsonBytes(chunked(batchOfSize(maxBodyBytes + 100 * 1024))));
    expect(problem.detail).toContain(`${maxBodyBytes} bytes`);
  });

  test("accepts a body of exactly the limit", async () => {
    const response = await postJsonBytes(batchOfSize(maxBodyBytes));
    expect(response.status).toBe(202);
  });

  test("accepts a chunked body of exactly the limit", async () => {
    const response = await postJsonBytes(chunked(batchOfSize(maxBodyBytes)));
    expect(response.status).toBe(202);
  });

  test("answers a body far over the limit with Problem Details, not Bun's own empty 413", async () => {
    await expect413(await postJsonBytes(new Uint8Array(3 * maxBodyBytes).fill(0x20)));
  });

  test("the chunked requests above really carry no Content-Length", async () => {
    const echo = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async (request) => {
        await request.arrayBuffer();
        return Response.json({ contentLength: request.headers.get("content-length"), transferEncoding: request.headers.get("transfer-encoding") });
      },
    });
    try {
      const response = await fetch(`http://127.0.0.1:${echo.port}/`, { method: "POST", body: chunked(batchOfSize(200 * 1024)), duplex: "half" } as RequestInit);
      expect(await response.json()).toEqual({ contentLength: null, transferEncoding: "chunked" });
    } finally {
      echo.stop(true);
    }
  });
});

describe("415 Unsupported Media Type", () => {
  const body = JSON.stringify([asset(0)]);

  test("answers 415 Problem Details when Content-Type is missing", async () => {
    const response = await post(encode(body), {});
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    const problem = await expect415(response);
    expect(problem.detail).toContain("Content-Type: application/json");
    expect(problem.detail).toContain("missing");
  });

  test.each([
    "text/plain",
    "application/xml",
    "application/json; charset=latin1",
    "application/json; charset=iso-8859-1",
    "text/json",
    "application/jsonl",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
  ])("answers 415 Problem Details for Content-Type %s", async (contentType) => {
    const problem = await expect415(await post(body, { "content-type": contentType }));
    expect(problem.detail).toContain("Content-Type: application/json");
    expect(problem.detail).toContain(`'${contentType}'`);
  });

  test.each([
    "application/json",
    "application/json; charset=utf-8",
    "application/json;charset=UTF-8",
    'application/json; charset="utf-8"',
    "Application/JSON",
  ])("accepts Content-Type %s", async (contentType) => {
    const response = await post(body, { "content-type": contentType });
    expect(response.status).toBe(202);
  });
});

describe("authentication comes first", () => {
  test("answers 401, not 415, to a wrong key with a wrong Content-Type", async () => {
    const response = await post(body(), { "content-type": "text/plain" }, "0123456789abcdef0123456789abcdef_1");
    expect(response.status).toBe(401);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
  });

  test("answers 401, not 415, to a missing key with no Content-Type", async () => {
    const response = await post(encode(body()), {}, null);
    expect(response.status).toBe(401);
  });

  test("answers 401, not 415, to another environment's key", async () => {
    const other = await server.addEnvironment("limits-other");
    const response = await post(body(), { "content-type": "application/xml" }, other.key);
    expect(response.status).toBe(401);
  });

  function body() {
    return JSON.stringify([asset(0)]);
  }
});

describe("never a 5xx", () => {
  const cases: Array<[string, () => Promise<Response>]> = [
    ["Content-Length over the limit", () => postJsonBytes(batchOfSize(maxBodyBytes + 1))],
    ["a body far over the limit", () => postJsonBytes(new Uint8Array(3 * maxBodyBytes).fill(0x20))],
    ["a chunked body over the limit", () => postJsonBytes(chunked(batchOfSize(2 * maxBodyBytes)))],
    ["binary garbage", () => postJsonBytes(crypto.getRandomValues(new Uint8Array(4096)))],
    ["an empty body", () => postJsonBytes(new Uint8Array(0))],
    ["invalid UTF-8", () => postJsonBytes(new Uint8Array([0x5b, 0xff, 0x5d]))],
    ["a wrong Content-Type", () => post("[]", { "content-type": "text/plain" })],
    ["a Content-Type with extra parameters", () => post("[]", { "content-type": "application/json; charset=utf-8; profile=x" })],
    ["a malformed Content-Type", () => post("[]", { "content-type": ";;;=" })],
    ["a wrong key and a body over the limit", () => post(batchOfSize(maxBodyBytes + 1), { "content-type": "application/json" }, "x_1")],
  ];
  test.each(cases)("%s", async (_, send) => {
    const response = await send();
    expect(response.status).toBeGreaterThanOrEqual(400);
    expect(response.status).toBeLessThan(500);
  });
});
