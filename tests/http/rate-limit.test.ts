import { afterAll, beforeAll, expect, test } from "bun:test";
import { postJson } from "../helpers/api";
import { asset } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ authFailuresPerMinute: 5 });
});
afterAll(() => server.close());

const get = (path: string, key: string | null) => fetch(`${server.url}${path}`, { headers: key === null ? {} : { "api-key": key } });

test("after too many wrong keys from one address, every request from it is 429 with Retry-After, even with a valid key", async () => {
  // Successes do not count.
  for (let i = 0; i < 10; i++) expect((await get("/default/v2/jobs", server.key)).status).toBe(200);

  // Five failures, of every kind and across endpoints and environments, are answered 401.
  const failures = [
    get("/default/v2/jobs", "0".repeat(64) + "_1"),
    get("/default/v2/status/1", null),
    get("/other/v2/assets", server.key),
    postJson(server.base, "assets", "nonsense", [asset(1)]),
    get("/default/v2/subareas/x", `${server.key.split("_")[0]}_999`),
  ];
  for (const response of failures) expect((await response).status).toBe(401);

  for (const response of [await get("/default/v2/jobs", server.key), await postJson(server.base, "assets", server.key, [asset(2)]), await get("/default/v2/jobs", "wrong_1")]) {
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
  // Nothing was queued while refused; what needs no key still answers.
  expect((await get("/healthz", null)).status).toBe(200);
  expect(await server.query("SELECT id FROM jobs")).toHaveLength(0);
});
