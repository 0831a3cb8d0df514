import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { importAndWait } from "../helpers/api";
import { rawRequest } from "../helpers/raw-http";
import { startTestServer, type TestServer } from "../helpers/server";

// RFC 9110's answers where the API had said "nothing here": a method a path does not answer is a 405 with Allow,
// and a query parameter sent empty is a 400 naming it, never taken as absent.

let server: TestServer;
let jobId: number;
beforeAll(async () => {
  server = await startTestServer();
  jobId = (await importAndWait(server.base, "subareas", server.key, [{ id: "north", name: "North" }])).id;
});
afterAll(() => server.close());

const problemOf = async (response: Response) => ({
  status: response.status,
  allow: response.headers.get("allow"),
  type: response.headers.get("content-type"),
  body: (await response.json()) as { status: number; title: string; detail: string; errors?: Record<string, string[]> },
});

describe("405 Method Not Allowed", () => {
  test.each(["DELETE", "PUT", "PATCH", "OPTIONS"])("%s /v2/assets: 405, Allow: GET, HEAD, POST, as Problem Details", async (method) => {
    const answer = await problemOf(await fetch(`${server.base}/v2/assets`, { method, headers: { "api-key": server.key } }));
    expect(answer).toMatchObject({ status: 405, allow: "GET, HEAD, POST", type: "application/problem+json", body: { status: 405, title: "Method Not Allowed" } });
    expect(answer.body.detail).toBe(`${method} is not an operation of this path, which answers GET, HEAD, POST. /swagger lists every operation.`);
  });

  test("TRACE too (sent raw: fetch() drops the body of an answer to TRACE)", async () => {
    const answer = await rawRequest(server.port, `TRACE /default/v2/assets HTTP/1.1\r\nHost: importd\r\nApi-Key: ${server.key}\r\nConnection: close\r\n\r\n`);
    expect(answer).toMatchObject({ status: 405, headers: { allow: "GET, HEAD, POST", "content-type": "application/problem+json" } });
    expect(JSON.parse(answer.body)).toMatchObject({ status: 405, title: "Method Not Allowed" });
  });

  test("GET on the cancel URL: 405, Allow: POST; a record's URL allows GET and HEAD only; so do the server's own paths", async () => {
    expect(await problemOf(await fetch(`${server.base}/v2/status/${jobId}/cancel`, { headers: { "api-key": server.key } }))).toMatchObject({ status: 405, allow: "POST" });
    expect(await problemOf(await fetch(`${server.base}/v2/assets/A-1`, { method: "POST", headers: { "api-key": server.key } }))).toMatchObject({ status: 405, allow: "GET, HEAD" });
    expect(await problemOf(await fetch(`${server.url}/healthz`, { method: "POST" }))).toMatchObject({ status: 405, allow: "GET, HEAD" });
  });

  test("under an environment the key comes first (DECISIONS 1): without a good one, a wrong method or a path nothing answers is a 401; with one, 405 and 404", async () => {
    for (const key of [undefined, `${"0".repeat(64)}_1`, server.key.replace(/^./, (c) => (c === "a" ? "b" : "a"))]) {
      const headers: Record<string, string> = key === undefined ? {} : { "api-key": key };
      for (const [method, path] of [["DELETE", "/v2/jobs"], ["PUT", "/v2/assets"], ["GET", `/v2/status/${jobId}/cancel`], ["DELETE", "/v2/nothing"], ["POST", "/v2"]]) {
        const answer = await problemOf(await fetch(`${server.base}${path}`, { method, headers }));
        expect({ method, path, status: answer.status, allow: answer.allow, type: answer.type, title: answer.body.title }).toEqual({ method, path, status: 401, allow: null, type: "application/problem+json", title: "Unauthorized" });
      }
    }
    // An environment that does not exist is refused alike, whatever the path.
    expect((await fetch(`${server.url}/nowhere/v2/nothing`, { method: "DELETE", headers: { "api-key": server.key } })).status).toBe(401);
    expect((await problemOf(await fetch(`${server.base}/v2/nothing`, { method: "DELETE", headers: { "api-key": server.key } }))).status).toBe(404);
    expect((await problemOf(await fetch(`${server.base}/v2/status/${jobId}/cancel/again`, { method: "POST", headers: { "api-key": server.key } }))).status).toBe(404);
    // The server's own paths are not under an environment: they need no key.
    expect((await problemOf(await fetch(`${server.url}/healthz`, { method: "DELETE" }))).status).toBe(405);
    expect((await problemOf(await fetch(`${server.url}/nothing/here`))).status).toBe(404);
  });
});

type Operation = { operationId: string; parameters?: Array<{ name: string; in: string; schema?: { type?: string; enum?: string[] } }> };

describe("a query parameter sent empty", () => {
  test("is a 400 naming it, for every query parameter of every operation in the document, with = and without", async () => {
    const document = (await (await fetch(`${server.url}/swagger/json`)).json()) as { paths: Record<string, Record<string, Operation>> };
    const seen: string[] = [];
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        for (const { name } of (operation.parameters ?? []).filter((parameter) => parameter.in === "query")) {
          for (const query of [`${name}=`, name]) {
            const url = `${server.base}${path.replace("{id}", String(jobId))}?${query}`;
            const body = method === "post" ? JSON.stringify([{ id: "south", name: "South" }]) : undefined;
            const answer = await problemOf(await fetch(url, { method: method.toUpperCase(), body, headers: { "api-key": server.key, "content-type": "application/json" } }));
            expect({ url, status: answer.status, keys: Object.keys(answer.body.errors ?? {}) }).toEqual({ url, status: 400, keys: [name] });
            expect(answer.body.errors![name]![0]).toEndWith("You sent it empty: give a value, or leave the parameter out.");
          }
          seen.push(`${operation.operationId} ${name}`);
        }
      }
    }
    // Every kind of query parameter the API has was tried.
    expect(seen).toEqual(expect.arrayContaining(["importAssets dryRun", "listJobs status", "listJobs type", "listJobs dryRun", "listJobs limit", "listJobs after", "listAssets after", "listRejectedRecords after"]));
  });

  test("?dryRun= queues no job at all (it used to run a real import)", async () => {
    const before = (await (await fetch(`${server.base}/v2/jobs?limit=1000`, { headers: { "api-key": server.key } })).json()) as { items: unknown[] };
    const answer = await fetch(`${server.base}/v2/subareas?dryRun=`, { method: "POST", body: JSON.stringify([{ id: "east", name: "East" }]), headers: { "api-key": server.key, "content-type": "application/json" } });
    expect(answer.status).toBe(400);
    const after = (await (await fetch(`${server.base}/v2/jobs?limit=1000`, { headers: { "api-key": server.key } })).json()) as { items: unknown[] };
    expect(after.items).toHaveLength(before.items.length);
  });
});

type QueryParameter = { name: string; in: string; schema?: { type?: string; enum?: string[] } };

/** Two values a parameter's schema allows, each of which alone would be taken. */
const twoValues = ({ schema = {} }: QueryParameter): [string, string] =>
  schema.enum ? [schema.enum[0]!, schema.enum[1] ?? schema.enum[0]!] : schema.type === "boolean" ? ["true", "false"] : ["1", "2"];

describe("a query parameter given more than once", () => {
  test("is a 400 naming it, for every query parameter of every operation in the document, even when each value alone is good", async () => {
    const document = (await (await fetch(`${server.url}/swagger/json`)).json()) as { paths: Record<string, Record<string, Operation>> };
    const seen: string[] = [];
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        for (const parameter of (operation.parameters ?? []).filter(({ in: where }) => where === "query")) {
          const [first, second] = twoValues(parameter);
          const url = `${server.base}${path.replace("{id}", String(jobId))}?${parameter.name}=${first}&${parameter.name}=${second}`;
          const body = method === "post" ? JSON.stringify([{ id: "south", name: "South" }]) : undefined;
          const answer = await problemOf(await fetch(url, { method: method.toUpperCase(), body, headers: { "api-key": server.key, "content-type": "application/json" } }));
          expect({ url, status: answer.status, errors: answer.body.errors }).toEqual({ url, status: 400, errors: { [parameter.name]: [`'${parameter.name}' was given 2 times; give it once.`] } });
          seen.push(`${operation.operationId} ${parameter.name}`);
        }
      }
    }
    expect(seen).toEqual(expect.arrayContaining(["importSubAreas dryRun", "listJobs status", "listJobs type", "listJobs dryRun", "listJobs limit", "listJobs after", "listAssets limit", "listAssets after", "listRejectedRecords limit", "listRejectedRecords after"]));
  });

  test("POST ?dryRun=true&dryRun=false queues no job at all (it used to run a real import, the last value winning)", async () => {
    const count = async () => ((await (await fetch(`${server.base}/v2/jobs?limit=1000`, { headers: { "api-key": server.key } })).json()) as { items: unknown[] }).items.length;
    const before = await count();
    for (const query of ["dryRun=true&dryRun=false", "dryRun=true&dry%52un=false&dryRun=true"]) {
      const answer = await problemOf(await fetch(`${server.base}/v2/subareas?${query}`, { method: "POST", body: JSON.stringify([{ id: "east", name: "East" }]), headers: { "api-key": server.key, "content-type": "application/json" } }));
      expect({ query, status: answer.status, errors: answer.body.errors }).toEqual({ query, status: 400, errors: { dryRun: [`'dryRun' was given ${query.split("&").length} times; give it once.`] } });
    }
    expect(await count()).toBe(before);
  });

  test("names every parameter given twice; a name no route reads is ignored however often, as it is once; HEAD is checked as GET", async () => {
    const answer = await problemOf(await fetch(`${server.base}/v2/jobs?limit=5&status=Failed&limit=6&after=1&status=Failed`, { headers: { "api-key": server.key } }));
    expect(answer).toMatchObject({ status: 400, body: { errors: { limit: ["'limit' was given 2 times; give it once."], status: ["'status' was given 2 times; give it once."] } } });
    expect((await fetch(`${server.base}/v2/jobs?utm=a&utm=b&limit=5`, { headers: { "api-key": server.key } })).status).toBe(200);
    expect((await fetch(`${server.base}/v2/status/${jobId}?limit=1&limit=2`, { headers: { "api-key": server.key } })).status).toBe(200);
    expect((await fetch(`${server.base}/v2/jobs?limit=1&limit=2`, { method: "HEAD", headers: { "api-key": server.key } })).status).toBe(400);
  });

  test("the key comes first (DECISIONS 1): without a good one, a 401", async () => {
    for (const headers of [{}, { "api-key": `${"0".repeat(64)}_1` }] as Array<Record<string, string>>) {
      const answer = await fetch(`${server.base}/v2/subareas?dryRun=true&dryRun=false`, { method: "POST", body: "[]", headers: { ...headers, "content-type": "application/json" } });
      expect(answer.status).toBe(401);
      expect((await fetch(`${server.base}/v2/jobs?limit=1&limit=2`, { headers })).status).toBe(401);
    }
  });
});
