import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { answersChecked, checkAnswersOf, stopChecking } from "../helpers/contract";
import { startTestServer, type TestServer } from "../helpers/server";

// The checker every test server's answers go through (tests/helpers/contract.ts): shown at work on a real server,
// and shown to catch a server that drifted from its document, here a stand-in serving the real document.

let server: TestServer;
let drifted: ReturnType<typeof Bun.serve>;
let answers: Record<string, () => Response>;
beforeAll(async () => {
  server = await startTestServer();
  const document = await (await fetch(`${server.url}/swagger/json`)).text();
  const job = await (await fetch(`${server.base}/v2/assets`, { method: "POST", headers: { "api-key": server.key, "content-type": "application/json" }, body: "[]" })).json();
  answers = {};
  drifted = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (request) => {
      const path = new URL(request.url).pathname;
      if (path === "/swagger/json") return new Response(document, { headers: { "content-type": "application/json" } });
      return (answers[path] ?? (() => Response.json(job)))();
    },
  });
  checkAnswersOf(drifted.url.origin);
});
afterAll(async () => {
  stopChecking(drifted.url.origin);
  drifted.stop(true);
  await server.close();
});

const base = () => `${drifted.url.origin}/default/v2`;
const get = (path: string) => fetch(`${base()}${path}`, { headers: { "api-key": "x" } });

describe("answers checked against the OpenAPI document", () => {
  test("a real server's answers are checked, and pass", async () => {
    const before = answersChecked();
    const response = await fetch(`${server.base}/v2/status/1`, { headers: { "api-key": server.key } });
    expect(response.status).toBe(404);
    expect((await response.json()).status).toBe(404); // the body is still there for the test
    expect(answersChecked()).toBe(before + 1);
  });

  test("an answer that matches passes through unchanged", async () => {
    answers["/default/v2/status/7"] = () => Response.json({ id: 7, importJobStatus: "Pending", importJobType: "Asset", recordCount: 1, dryRun: false, operation: "upsert", createdAt: new Date().toISOString(), startedAt: null, completedAt: null, statusUrl: "/default/v2/status/7", output: null });
    const response = await get("/status/7");
    expect(response.status).toBe(200);
  });

  test("a body that does not match its schema is caught", async () => {
    answers["/default/v2/status/8"] = () => Response.json({ id: "lots" });
    await expect(get("/status/8")).rejects.toThrow(/GET \/default\/v2\/status\/8 answered 200, which the OpenAPI document does not allow:[\s\S]*body\/id must be integer/);
  });

  test("a status the operation does not document is caught", async () => {
    answers["/default/v2/status/9"] = () => Response.json({}, { status: 500 });
    await expect(get("/status/9")).rejects.toThrow(/status 500 is not documented for getJob/);
  });

  test("a Problem body that is not Problem Details is caught", async () => {
    answers["/default/v2/status/10"] = () => Response.json({ message: "nope" }, { status: 404, headers: { "content-type": "application/problem+json" } });
    await expect(get("/status/10")).rejects.toThrow(/body must have required property/);
  });

  test("a media type other than the documented one is caught", async () => {
    answers["/default/v2/status/11"] = () => new Response("{}", { status: 404, headers: { "content-type": "text/plain" } });
    await expect(get("/status/11")).rejects.toThrow(/Content-Type text\/plain is not one of the documented application\/problem\+json/);
  });

  test("a header the document does not declare, or of the wrong type, is caught", async () => {
    answers["/default/v2/status/12"] = () => Response.json({ type: "about:blank", title: "Not Found", status: 404 }, { status: 404, headers: { "content-type": "application/problem+json", "x-secret": "1" } });
    await expect(get("/status/12")).rejects.toThrow(/headers must NOT have additional properties[\s\S]*x-secret/);
    answers["/default/v2/status/13"] = () => Response.json({ type: "about:blank", title: "Too Many Requests", status: 429 }, { status: 429, headers: { "content-type": "application/problem+json", "retry-after": "soon" } });
    await expect(get("/status/13")).rejects.toThrow(/headers\/retry-after must be integer/);
  });
});
