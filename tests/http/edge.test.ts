import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadConfig, type Config } from "../../src/config";
import { startServer } from "../../src/server";
import { importBatch, waitForJob } from "../helpers/api";
import { rawRequest, type RawResponse } from "../helpers/raw-http";

import { startTestServer, tempDir, testTlsConfig, type TestServer } from "../helpers/server";

// What a load balancer's health check, an old monitoring probe or a hand-written client may send: every such
// request is routed by its path alone and answered by importd's own handlers (DECISIONS section 8).

/** No stack trace, no file path, no HTML page: what Bun's development error page would have shown. */
function expectNothingLeaked(response: RawResponse) {
  expect(response.body).not.toMatch(/<!doctype html|<html/i);
  expect(response.body).not.toMatch(/\.(ts|js):\d+|\bat \S+ \(|node_modules|\/work\/|\/src\//);
}

let server: TestServer;
let jobId: number;
beforeAll(async () => {
  server = await startTestServer();
  jobId = (await importBatch(server.base, "subareas", server.key, [{ id: "north", name: "North" }])).id;
  await waitForJob(server.base, server.key, jobId);
});
afterAll(() => server.close());

const send = (request: string) => rawRequest(server.port, request);

describe("routed by the path alone, whatever the Host header", () => {
  test("HTTP/1.0 without a Host header (HAProxy's default health check) reaches /healthz", async () => {
    const response = await send("GET /healthz HTTP/1.0\r\n\r\n");
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body)).toEqual({ status: "ok" });
  });

  test("HTTP/1.0 without a Host header reaches /readyz and the API, key checked", async () => {
    expect((await send("GET /readyz HTTP/1.0\r\n\r\n")).status).toBe(200);
    const job = await send(`GET /default/v2/status/${jobId} HTTP/1.0\r\nApi-Key: ${server.key}\r\n\r\n`);
    expect(job.status).toBe(200);
    expect(JSON.parse(job.body)).toMatchObject({ id: jobId, importJobStatus: "Succeeded" });
    const noKey = await send(`GET /default/v2/status/${jobId} HTTP/1.0\r\n\r\n`);
    expect(noKey.status).toBe(401);
    expect(noKey.headers["content-type"]).toBe("application/problem+json");
  });

  test("a POST without a Host header is read and queued like any other", async () => {
    const body = JSON.stringify([{ id: "south", name: "South" }]);
    const response = await send(
      `POST /default/v2/subareas HTTP/1.0\r\nApi-Key: ${server.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    expect(response.status).toBe(202);
    expect(JSON.parse(response.body)).toMatchObject({ importJobType: "SubArea", importJobStatus: "Pending", recordCount: 1 });
  });

  const hosts = ["a", "ab", "abc", "a:1", "localhost:65535", "[::1]:80", "user:pw@host", "a b", "ho$t!", "x".repeat(2000), "\u00e9.example", "a:99999", "4e7ta:-1"];
  for (const host of hosts) {
    test(`Host: ${JSON.stringify(host.length > 20 ? `${host.slice(0, 8)}… (${host.length} characters)` : host)} reaches the right route`, async () => {
      const health = await send(`GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
      expect(health.status).toBe(200);
      const job = await send(`GET /default/v2/status/${jobId} HTTP/1.1\r\nHost: ${host}\r\nApi-Key: ${server.key}\r\nConnection: close\r\n\r\n`);
      expect(job.status).toBe(200);
      expect(JSON.parse(job.body).id).toBe(jobId);
      const missing = await send(`GET /default/v2/status/999999 HTTP/1.1\r\nHost: ${host}\r\nApi-Key: ${server.key}\r\nConnection: close\r\n\r\n`);
      expect(missing.status).toBe(404);
      expect(missing.headers["content-type"]).toBe("application/problem+json");
    });
  }

  test("two Host headers", async () => {
    const response = await send(`GET /default/v2/jobs HTTP/1.1\r\nHost: a\r\nHost: b\r\nApi-Key: ${server.key}\r\nConnection: close\r\n\r\n`);
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body).items.length).toBeGreaterThan(0);
  });

  test("an absolute-form request target is routed by its path, with or without a Host header", async () => {
    for (const request of [
      "GET http://x/healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
      "GET http://some.where:8080/healthz?probe=1 HTTP/1.1\r\nHost: elsewhere\r\nConnection: close\r\n\r\n",
      "GET http://x/healthz HTTP/1.0\r\n\r\n",
    ]) {
      const response = await send(request);
      expect(response.status).toBe(200);
      expect(JSON.parse(response.body)).toEqual({ status: "ok" });
    }
    const job = await send(`GET http://x/default/v2/status/${jobId} HTTP/1.1\r\nHost: a\r\nApi-Key: ${server.key}\r\nConnection: close\r\n\r\n`);
    expect(job.status).toBe(200);
    expect(JSON.parse(job.body).id).toBe(jobId);
  });

  test("an unknown path without a Host header is a Problem Details 404", async () => {
    const response = await send("GET /nowhere HTTP/1.0\r\n\r\n");
    expect(response.status).toBe(404);
    expect(response.headers["content-type"]).toBe("application/problem+json");
    expectNothingLeaked(response);
  });

  test("the request log has the path, whatever the Host", async () => {
    await send("GET /healthz?x=1 HTTP/1.0\r\n\r\n");
    await send("GET /readyz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    const paths = server.logs.filter((entry) => entry.msg === "request").map((entry) => entry.path);
    expect(paths).toContain("/healthz");
    expect(paths).toContain("/readyz");
    expect(server.logs.some((entry) => entry.msg === "unhandled error")).toBe(false);
  });
});

test("an error nobody foresaw is a generic Problem Details 500: no stack trace, no file path, and the server stays up", async () => {
  // The request log is the last thing between an answer and the socket; a log that throws there stands for
  // any bug that escapes the app's own error handling.
  const dataDir = tempDir();
  const logged: Array<Record<string, unknown>> = [];
  const config = Object.freeze({ ...loadConfig({}, {}), port: 0, host: "127.0.0.1", workers: 1, dataDir, ...testTlsConfig() }) as Config;
  const broken = await startServer(config, (entry) => {
    if (entry.msg === "request") throw new Error(`log sink failed in ${import.meta.path}`);
    logged.push(entry);
  });
  try {
    for (const request of ["GET /healthz HTTP/1.0\r\n\r\n", "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"]) {
      const response = await rawRequest(broken.port, request);
      expect(response.status).toBe(500);
      expect(response.headers["content-type"]).toBe("application/problem+json");
      expect(JSON.parse(response.body)).toEqual({
        type: "https://tools.ietf.org/html/rfc9110#section-15.6.1",
        title: "Internal Server Error",
        status: 500,
        detail: "Something went wrong on the server. The error was logged; try again.",
      });
      expectNothingLeaked(response);
    }
    // Logged for the operator, with what went wrong.
    expect(logged.some((entry) => entry.msg === "unhandled error" && String(entry.error).includes("log sink failed"))).toBe(true);
  } finally {
    await broken.stop();
  }
});

describe("a first-time visitor finds the way in", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.close());

  test("GET / points to Swagger UI, the OpenAPI document and the API's base paths, without a key", async () => {
    const response = await fetch(`${server.url}/`);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ service: "importd", documentation: "/swagger", openapi: "/swagger/json" });
  });

  test("GET /<environment> (a base URL on its own) is a 404 that says where the API's paths are", async () => {
    const response = await fetch(`${server.url}/default`, { headers: { "api-key": server.key } });
    expect(response.status).toBe(404);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect((await response.json()).detail).toContain("/<environment>/v2/… (for example GET /default/v2/jobs); /swagger lists them all");
  });
});
