import { afterAll, beforeAll, expect, test } from "bun:test";
import { postJson } from "../helpers/api";
import { asset } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

let server: TestServer;
beforeAll(async () => {
  // The test's requests come from 127.0.0.1, a proxy on this machine as far as the server knows (--trusted-proxies is
  // loopback by default): with X-Forwarded-For they are that client's, without it this machine's own.
  server = await startTestServer({ authFailuresPerMinute: 5 });
});
afterAll(() => server.close());

const client = { "x-forwarded-for": "203.0.113.7" };
const get = (path: string, key: string | null, from: Record<string, string> = client) =>
  fetch(`${server.url}${path}`, { headers: { ...from, ...(key === null ? {} : { "api-key": key }) } });

test("after too many wrong keys from one address, every request from it is 429 with Retry-After, even with a valid key", async () => {
  // Successes do not count.
  for (let i = 0; i < 10; i++) expect((await get("/default/v2/jobs", server.key)).status).toBe(200);

  // Five failures, of every kind and across endpoints and environments, are answered 401.
  const failures = [
    get("/default/v2/jobs", "0".repeat(64) + "_1"),
    get("/default/v2/status/1", null),
    get("/other/v2/assets", server.key),
    postJson(server.base, "assets", "nonsense", [asset(1)], client),
    get("/default/v2/subareas/x", `${server.key.split("_")[0]}_999`),
  ];
  for (const response of failures) expect((await response).status).toBe(401);

  for (const response of [await get("/default/v2/jobs", server.key), await postJson(server.base, "assets", server.key, [asset(2)], client), await get("/default/v2/jobs", "wrong_1")]) {
    expect(response.status).toBe(429);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    const wait = Number(response.headers.get("retry-after"));
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(60);
    expect(await response.json()).toEqual({
      type: "https://tools.ietf.org/html/rfc6585#section-4",
      title: "Too Many Requests",
      status: 429,
      detail: `Too many requests with a wrong API key came from this address; none is checked for ${wait} seconds. Fix the key, then try again after that.`,
    });
  }
  // Nothing was queued while refused; what needs no key still answers; another client is not held up.
  expect((await get("/healthz", null)).status).toBe(200);
  expect(await server.query("SELECT id FROM jobs")).toHaveLength(0);
  expect((await get("/default/v2/jobs", server.key, { "x-forwarded-for": "203.0.113.8" })).status).toBe(200);
});

test("a client on this machine (127.0.0.1, nothing forwarded) is limited like any other: a stream of wrong keys ends in 429", async () => {
  const local = {};
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) statuses.push((await get("/default/v2/jobs", `${"0".repeat(64)}_1`, local)).status);
  expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
  const refused = await get("/default/v2/jobs", server.key, local);
  expect(refused.status).toBe(429);
  expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  // The clients the proxy on this machine forwards for are counted apart: none is held up by this machine's count.
  expect((await get("/default/v2/jobs", server.key, { "x-forwarded-for": "203.0.113.9" })).status).toBe(200);
});
