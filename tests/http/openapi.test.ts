import { afterAll, beforeAll, expect, test } from "bun:test";
import { resources } from "../../src/resources/registry";
import { startTestServer, type TestServer } from "../helpers/server";

let server: TestServer;
let document: { paths: Record<string, Record<string, { parameters?: Array<{ name: string; in: string }>; responses: Record<string, unknown>; requestBody?: unknown }>>; components: { securitySchemes: Record<string, unknown> }; security: unknown[] };
beforeAll(async () => {
  server = await startTestServer();
  const response = await fetch(`${server.url}/swagger/json`);
  expect(response.status).toBe(200);
  document = await response.json();
});
afterAll(() => server.close());

test("Swagger UI and the OpenAPI document are served without a key", async () => {
  const ui = await fetch(`${server.url}/swagger`);
  expect(ui.status).toBe(200);
  expect(ui.headers.get("content-type")).toContain("text/html");
  expect(await ui.text()).toContain("swagger-ui");
});

test("every API route is documented, with the environment as a path parameter", () => {
  const expected = [
    "get /{env}/v2/status/{id}",
    "get /{env}/v2/jobs",
    ...resources.flatMap((r) => [`post /{env}/v2/${r.path}`, `get /{env}/v2/${r.path}`, `get /{env}/v2/${r.path}/{id}`]),
  ];
  const documented = Object.entries(document.paths).flatMap(([path, methods]) => Object.keys(methods).map((method) => `${method} ${path}`));
  expect(documented.sort()).toEqual(expected.sort());
  for (const [path, methods] of Object.entries(document.paths)) {
    for (const operation of Object.values(methods)) {
      expect(operation.parameters?.some((p) => p.name === "env" && p.in === "path")).toBe(true);
      expect(Object.keys(operation.responses)).toContain("401");
      expect(path.startsWith("/{env}/v2/")).toBe(true);
    }
  }
});

test("import operations document the record schema, the 202 job and the Problem Details errors", () => {
  const post = document.paths["/{env}/v2/assets"]!.post!;
  expect(JSON.stringify(post.requestBody)).toContain("subAreaId");
  expect(Object.keys(post.responses).sort()).toEqual(["202", "400", "401", "413", "415", "503", "507"]);
  expect(JSON.stringify(post.responses["202"])).toContain("importJobStatus");
  expect(JSON.stringify(post.responses["400"])).toContain("application/problem+json");
});

test("the Api-Key header is the security scheme", () => {
  expect(document.components.securitySchemes.ApiKey).toEqual({ type: "apiKey", in: "header", name: "Api-Key" });
  expect(document.security).toEqual([{ ApiKey: [] }]);
});
