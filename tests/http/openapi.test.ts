import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadConfig } from "../../src/config";
import { buildApp } from "../../src/http/app";
import type { Services } from "../../src/http/services";
import { resources } from "../../src/resources/registry";
import { importAndWait } from "../helpers/api";
import { startTestServer, type TestServer } from "../helpers/server";

type Operation = {
  parameters?: Array<{ name: string; in: string; required?: boolean; schema?: { default?: unknown; type?: string; pattern?: string; minLength?: number; maxLength?: number } }>;
  responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
  requestBody?: { content: Record<string, { schema: unknown; example?: unknown[] }> };
};
type OpenApiDocument = {
  openapi: string;
  servers: unknown[];
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, unknown>; schemas: Record<string, unknown> };
  security: unknown[];
};

let server: TestServer;
let document: OpenApiDocument;
beforeAll(async () => {
  server = await startTestServer();
  const response = await fetch(`${server.url}/swagger/json`);
  expect(response.status).toBe(200);
  document = await response.json();
});
afterAll(() => server.close());

const operations = () =>
  Object.entries(document.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, operation]) => ({ path, method, operation })));

/** `node` with every $ref replaced by the component it names, as a client generator reads it. */
const resolved = (node: unknown): unknown => {
  if (Array.isArray(node)) return node.map(resolved);
  if (!node || typeof node !== "object") return node;
  const ref = (node as { $ref?: string }).$ref;
  if (ref) return resolved(document.components.schemas[ref.replace("#/components/schemas/", "")]);
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, resolved(value)]));
};

// Served on purpose outside the API document: the document and its UI, and the operator's probes.
const undocumented = new Set(["GET /swagger", "GET /swagger/json", "GET /swagger/assets/swagger-ui-bundle.js", "GET /swagger/assets/swagger-init.js", "GET /swagger/assets/swagger-ui.css", "GET /healthz", "GET /readyz", "GET /metrics", "GET /"]);

describe("the OpenAPI document", () => {
  test("every integer the server sends is a plain JSON Schema integer, never Elysia's string-or-integer", () => {
    const responseSchemas = operations().flatMap(({ operation }) => Object.values(operation.responses).flatMap((response) => Object.values(response.content ?? {}).map((content) => resolved(content.schema))));
    const found: string[] = [];
    const walk = (node: unknown, path: string) => {
      if (Array.isArray(node)) return node.forEach((item, index) => walk(item, `${path}[${index}]`));
      if (!node || typeof node !== "object") return;
      const schema = node as Record<string, unknown>;
      if (schema.type === "string" && schema.format === "integer") found.push(path);
      for (const [key, value] of Object.entries(schema)) walk(value, `${path}.${key}`);
    };
    responseSchemas.forEach((schema, index) => walk(schema, `response ${index}`));
    expect(found).toEqual([]);
    // And the integers are there, as integers: the job id, say.
    const status = resolved(document.paths["/v2/status/{id}"]!.get!.responses["200"]!.content!["application/json"]!.schema) as { properties: Record<string, unknown> };
    expect(status.properties.id).toMatchObject({ type: "integer" });
    // Enums as enums.
    expect(status.properties.importJobStatus).toMatchObject({ type: "string", enum: ["Pending", "Processing", "Succeeded", "PartiallySucceeded", "Failed"] });
    expect(status.properties.importJobType).toMatchObject({ type: "string", enum: resources.map((resource) => resource.jobType) });
  });

  test("a set of values is an enum, never a union of constants (which generated Python clients read as its first constant); a map is additionalProperties", () => {
    const unions: string[] = [];
    const patternMaps: string[] = [];
    const walk = (node: unknown, path: string) => {
      if (Array.isArray(node)) return node.forEach((item, index) => walk(item, `${path}[${index}]`));
      if (!node || typeof node !== "object") return;
      const schema = node as Record<string, unknown>;
      if (Array.isArray(schema.anyOf) && schema.anyOf.some((option) => "const" in (option as object))) unions.push(path);
      if (schema.patternProperties) patternMaps.push(path);
      for (const [key, value] of Object.entries(schema)) walk(value, `${path}.${key}`);
    };
    walk(document, "$");
    expect({ unions, patternMaps }).toEqual({ unions: [], patternMaps: [] });
    const asset = document.components.schemas.Asset as { properties: Record<string, { type?: string; enum?: string[]; anyOf?: Array<{ properties?: Record<string, { type?: string; enum?: string[] }> }> }> };
    expect(asset.properties.shapeType).toEqual({ type: "string", enum: ["Point", "MultiPoint", "LineString", "MultiLineString", "Polygon", "MultiPolygon"] });
    expect(asset.properties.geolocation!.anyOf![0]!.properties!.locationUnit).toEqual({ type: "string", enum: ["m", "km", "ft", "mi"] });
    const problem = document.components.schemas.Problem as { properties: Record<string, unknown> };
    expect(problem.properties.errors).toMatchObject({ type: "object", additionalProperties: { type: "array", items: { type: "string" } } });
    const rejected = document.components.schemas.RejectedRecord as { properties: Record<string, unknown> };
    expect(rejected.properties.record).toMatchObject({ type: "object", additionalProperties: {} });
  });

  test("the rules beyond types are where tools look: the NUL ban and not-blank in each text field's pattern, order in x-importd-ordered", () => {
    const textFields: Array<[string, { pattern?: string; minLength?: number }]> = [];
    const walk = (node: unknown, path: string) => {
      if (!node || typeof node !== "object") return;
      const schema = node as Record<string, unknown>;
      if (schema.type === "string" && !schema.enum && !schema.format) textFields.push([path, schema]);
      for (const [key, value] of Object.entries(schema)) walk(value, `${path}.${key}`);
    };
    for (const resource of resources) walk(document.components.schemas[resource.jobType], resource.jobType);
    expect(textFields.length).toBeGreaterThan(10);
    for (const [path, { pattern, minLength }] of textFields) {
      const matches = (text: string) => new RegExp(pattern!).test(text);
      expect({ path, nul: matches("a\u0000b"), text: matches(" a b ") }).toEqual({ path, nul: false, text: true });
      expect({ path, blankAllowed: matches("  ") }).toEqual({ path, blankAllowed: minLength === undefined });
    }
    const asset = document.components.schemas.Asset as { description: string; "x-importd-ordered": unknown; properties: { geolocation: { anyOf: Array<{ "x-importd-ordered"?: unknown; description?: string }> } } };
    expect(asset["x-importd-ordered"]).toEqual([{ start: "startPoint", end: "endPoint" }]);
    expect(asset.description).toContain("`startPoint` must be less than or equal to `endPoint`");
    expect(asset.properties.geolocation.anyOf[0]!["x-importd-ordered"]).toEqual([{ start: "locationStart", end: "locationEnd" }]);
    expect(asset.properties.geolocation.anyOf[0]!.description).toContain("`locationStart` must be less than or equal to `locationEnd`");
  });

  test("every operation and every parameter has a description; the 202 links to getJob, cancelJob and listRejectedRecords by the job's id", () => {
    type Described = { description?: string; operationId?: string; parameters?: Array<{ name: string; description?: string }>; responses: Record<string, { links?: Record<string, { operationId: string; parameters: Record<string, string> }> }> };
    for (const { path, method, operation } of operations()) {
      const described = operation as unknown as Described;
      expect({ path, method, described: (described.description ?? "").length > 20 }).toEqual({ path, method, described: true });
      for (const parameter of described.parameters ?? []) expect({ path, parameter: parameter.name, described: (parameter.description ?? "").length > 5 }).toEqual({ path, parameter: parameter.name, described: true });
      if (method === "post" && described.responses["202"]) {
        const links = described.responses["202"].links ?? {};
        expect(Object.fromEntries(Object.entries(links).map(([name, link]) => [name, [link.operationId, link.parameters]]))).toEqual({
          getJob: ["getJob", { id: "$response.body#/id" }],
          cancelJob: ["cancelJob", { id: "$response.body#/id" }],
          listRejectedRecords: ["listRejectedRecords", { id: "$response.body#/id" }],
        });
      }
    }
  });

  test("every operation has an explicit, readable operationId, as SDK generators name their methods", () => {
    const ids = operations().map(({ operation }) => (operation as { operationId?: string }).operationId);
    expect(ids.sort()).toEqual(
      [
        "getJob", "cancelJob", "listJobs", "listRejectedRecords",
        "importAssets", "getAsset", "listAssets", "deleteAssets", "listDeletedAssets",
        "importSubAreas", "getSubArea", "listSubAreas", "deleteSubAreas", "listDeletedSubAreas",
        "importAssetTypes", "getAssetType", "listAssetTypes", "deleteAssetTypes", "listDeletedAssetTypes",
        "importAssetCategories", "getAssetCategory", "listAssetCategories", "deleteAssetCategories", "listDeletedAssetCategories",
        "createWebhook", "listWebhooks", "deleteWebhook", "testWebhook", "listJobDeliveries",
        "openSync", "getSync", "completeSync",
        "exportAssets", "exportSubAreas", "exportAssetTypes", "exportAssetCategories",
      ].sort(),
    );
  });

  test("every header the server sends is declared, each error status has its own example, and job ids in paths are integers", () => {
    type Response = { headers?: Record<string, unknown>; content?: Record<string, { example?: { status?: number; title?: string } }> };
    for (const { path, method, operation } of operations()) {
      const responses = operation.responses as Record<string, Response>;
      for (const [status, response] of Object.entries(responses)) {
        const example = response.content?.["application/problem+json"]?.example;
        if (Number(status) >= 400) expect({ path, method, status, example: example?.status }).toEqual({ path, method, status, example: Number(status) });
        if (["429", "503", "507"].includes(status)) expect({ path, status, header: Object.keys(response.headers ?? {}) }).toEqual({ path, status, header: ["Retry-After"] });
      }
      if (method === "post" && responses["202"]) expect(Object.keys(responses["202"].headers ?? {})).toContain("Location");
      const id = operation.parameters?.find((parameter) => parameter.name === "id" && parameter.in === "path");
      if (path.includes("/status/{id}")) expect({ path, schema: id?.schema }).toMatchObject({ path, schema: { type: "integer" } });
    }
    const rejected = document.paths["/v2/status/{id}/rejected"]!.get!.responses["409"] as Response;
    expect(Object.keys(rejected.headers ?? {})).toEqual(["Retry-After"]);
    const status = document.paths["/v2/status/{id}"]!.get!;
    expect(status.parameters?.map((parameter) => parameter.name)).toEqual(["id", "Prefer"]);
  });

  test("each pattern (and length) in the document is the one the server enforces: outside it a 400 naming the parameter, inside it no 400", async () => {
    const job = await importAndWait(server.base, "subareas", server.key, [{ id: "p", name: "P" }]);
    const parameter = (path: string, method: string, name: string) => {
      const schema = document.paths[path]![method]!.parameters!.find((candidate) => candidate.name === name)!.schema!;
      // (No asymmetric matcher on the shared document: bun's writes the matcher into the object it matched.)
      expect({ type: schema.type, pattern: typeof schema.pattern }).toEqual({ type: "string", pattern: "string" });
      const { pattern, minLength = 0, maxLength = Infinity } = schema;
      return { test: (value: string) => new RegExp(pattern!).test(value) && value.length >= minLength && value.length <= maxLength };
    };
    const cases = [
      { pattern: parameter("/v2/jobs", "get", "after"), key: "after", send: (value: string) => fetch(`${server.base}/v2/jobs?after=${encodeURIComponent(value)}`, { headers: { "api-key": server.key } }) },
      { pattern: parameter("/v2/status/{id}/rejected", "get", "after"), key: "after", send: (value: string) => fetch(`${server.base}/v2/status/${job.id}/rejected?after=${encodeURIComponent(value)}`, { headers: { "api-key": server.key } }) },
      { pattern: parameter("/v2/deletions/assets", "get", "after"), key: "after", send: (value: string) => fetch(`${server.base}/v2/deletions/assets?after=${encodeURIComponent(value)}`, { headers: { "api-key": server.key } }) },
      { pattern: parameter("/v2/deletions/assets", "post", "Idempotency-Key"), key: "Idempotency-Key", send: (value: string) => fetch(`${server.base}/v2/deletions/assets`, { method: "POST", headers: { "api-key": server.key, "content-type": "application/json", "idempotency-key": value }, body: "[]" }) },
      { pattern: parameter("/v2/assets", "post", "Idempotency-Key"), key: "Idempotency-Key", send: (value: string) => fetch(`${server.base}/v2/assets`, { method: "POST", headers: { "api-key": server.key, "content-type": "application/json", "idempotency-key": value }, body: "[]" }) },
    ];
    for (const { pattern, key, send } of cases) {
      for (const value of ["0", "1", "17", "007", "-1", "1.5", "abc", "a b", "x".repeat(300)]) {
        const response = await send(value);
        const problem = response.status === 400 ? ((await response.json()) as { errors?: Record<string, unknown> }) : undefined;
        const rejectedForIt = problem?.errors?.[key] !== undefined;
        expect({ key, value, rejectedForIt }).toEqual({ key, value, rejectedForIt: !pattern.test(value) });
      }
    }
  });

  test("the 405 is declared on every operation, with Allow listing the path's methods as the server answers them", async () => {
    type Declared = { headers?: Record<string, { schema?: { example?: string } }>; content?: Record<string, { example?: { status?: number } }> };
    const job = await importAndWait(server.base, "subareas", server.key, [{ id: "m", name: "M" }]);
    for (const [path, methods] of Object.entries(document.paths)) {
      const allowed = [...new Set(Object.keys(methods).flatMap((method) => (method === "get" ? ["GET", "HEAD"] : [method.toUpperCase()])))].sort().join(", ");
      for (const [method, operation] of Object.entries(methods)) {
        const declared = operation.responses["405"] as Declared | undefined;
        expect({ path, method, allow: declared?.headers?.Allow?.schema?.example, status: declared?.content?.["application/problem+json"]?.example?.status }).toEqual({ path, method, allow: allowed, status: 405 });
      }
      const refused = ["DELETE", "PUT", "PATCH", "POST"].find((method) => !allowed.split(", ").includes(method))!;
      const answer = await fetch(`${server.base}${path.replace("{id}", String(job.id))}`, { method: refused, headers: { "api-key": server.key } });
      expect({ path, refused, status: answer.status, allow: answer.headers.get("allow") }).toEqual({ path, refused, status: 405, allow: allowed });
    }
  });

  test("WebhookRequest.url: minLength 1, not blank, no NUL, maxLength in characters, as the route enforces them: outside, a 400 naming url; inside, none", async () => {
    const url = (resolved(document.components.schemas.WebhookRequest) as { properties: { url: { minLength?: number; maxLength?: number; pattern?: string } } }).properties.url;
    expect({ minLength: url.minLength, maxLength: url.maxLength, pattern: typeof url.pattern }).toEqual({ minLength: 1, maxLength: 2048, pattern: "string" });
    // JSON Schema counts characters (code points), as a regular expression with the u flag reads them.
    const allows = (value: string) => [...value].length >= url.minLength! && [...value].length <= url.maxLength! && new RegExp(url.pattern!, "u").test(value);
    const emoji = "\u{1F600}";
    for (const value of ["", " ", "\t\n ", "a\u0000b", "\u0000", "x", "http://127.0.0.1/hook", "a".repeat(2048), "a".repeat(2049), emoji.repeat(1500), emoji.repeat(2048), emoji.repeat(2049)]) {
      const response = await fetch(`${server.base}/v2/webhooks`, { method: "POST", headers: { "api-key": server.key, "content-type": "application/json" }, body: JSON.stringify({ url: value }) });
      const errors = response.status === 400 ? ((await response.json()) as { errors?: Record<string, unknown> }).errors : undefined;
      const shown = value.length > 20 ? `${[...value][0]} × ${[...value].length}` : JSON.stringify(value);
      expect({ value: shown, status: response.status === 400 ? 400 : "not 400", rejectedForUrl: errors?.url !== undefined }).toEqual({ value: shown, status: allows(value) ? "not 400" : 400, rejectedForUrl: !allows(value) });
    }
  });

  test("Prefer has a pattern (RFC 7240's grammar): each form the server reads a wait from is in it, and the server applies that wait; none is refused", async () => {
    const prefer = document.paths["/v2/status/{id}"]!.get!.parameters!.find((parameter) => parameter.name === "Prefer")!.schema!;
    expect({ type: prefer.type, pattern: typeof prefer.pattern }).toEqual({ type: "string", pattern: "string" });
    const pattern = new RegExp(prefer.pattern!, "u");
    const job = await importAndWait(server.base, "subareas", server.key, [{ id: "w", name: "W" }]);
    const applied = async (value: string) => {
      const response = await fetch(`${server.base}/v2/status/${job.id}`, { headers: { "api-key": server.key, prefer: value } });
      expect(response.status).toBe(200);
      return response.headers.get("preference-applied");
    };
    const waits: Array<[string, string]> = [
      ["wait=5", "wait=5"],
      ["WAIT=5", "wait=5"],
      ["wait = 5", "wait=5"],
      ["wait\t=\t5", "wait=5"],
      ['wait="5"', "wait=5"],
      ["wait=5; foo=bar", "wait=5"],
      ["wait=5;", "wait=5"],
      ["respond-async, wait=5", "wait=5"],
      ["return=minimal,wait=5, wait=9", "wait=5"],
      [', , wait=5 ,', "wait=5"],
      ['handling="a,b\\"c", wait=5', "wait=5"],
      ["wait=0", "wait=0"],
      ["wait=007", "wait=7"],
      [`wait=${"9".repeat(30)}`, "wait=60"],
    ];
    for (const [value, expected] of waits) expect({ value, inPattern: pattern.test(value), applied: await applied(value) }).toEqual({ value, inPattern: true, applied: expected });
    // In the pattern without a wait the server can read: answered at once, no wait applied.
    for (const value of ["respond-async", "return=minimal", "wait=soon", "wait=1.5", "wait=-1", "wait", "foo; wait=5"]) {
      expect({ value, inPattern: pattern.test(value), applied: await applied(value) }).toEqual({ value, inPattern: true, applied: null });
    }
    // Outside it: not RFC 7240, and no wait read either (and no 400: a preference is never an error).
    for (const value of ['wait="5', "wait=5 5", "wait==5", "=5", "; wait=5", "wait=\u00e9"]) {
      expect({ value, inPattern: pattern.test(value), applied: await applied(value) }).toEqual({ value, inPattern: false, applied: null });
    }
  });

  test("an import body's optional fields may be null, as the server accepts them; required ones may not", () => {
    type Schema = { properties: Record<string, { anyOf?: Array<{ type?: string; properties?: Record<string, { anyOf?: unknown[] }> }> }>; required: string[] };
    const body = resolved(document.paths["/v2/assets"]!.post!.requestBody!.content["application/json"]!.schema) as { items: Schema };
    const asset = body.items;
    expect(asset.properties.description!.anyOf).toContainEqual({ type: "null" });
    expect(asset.properties.subAreaId!.anyOf).toBeUndefined();
    expect(asset.required).toContain("subAreaId");
    const geolocation = asset.properties.geolocation!.anyOf!.find((schema) => schema.type === "object")!;
    expect(geolocation.properties!.linearReferenceStart!.anyOf).toBeUndefined();
  });

  test("every shape a client handles is a named component, referenced with $ref, and no schema is inlined twice", () => {
    const components = Object.keys(document.components.schemas).sort();
    for (const name of ["JobDocument", "JobOutput", "RecordError", "Problem", "RejectedRecord", "JobPage", "RejectedRecordPage", "Asset", "StoredAsset", "AssetPage", "SubArea", "StoredSubArea"]) {
      expect(components).toContain(name);
    }
    const text = JSON.stringify(document.paths);
    expect(text).not.toContain("RFC 9457 Problem Details");
    expect(text).not.toContain('"importJobType":{');
    const problemRefs = text.split('"$ref":"#/components/schemas/Problem"').length - 1;
    const jobRefs = text.split('"$ref":"#/components/schemas/JobDocument"').length - 1;
    console.log(`OpenAPI: ${components.length} named schemas; Problem referenced ${problemRefs} times, JobDocument ${jobRefs} (both were inlined each time before)`);
    expect(problemRefs).toBeGreaterThan(20);
  });

  test("is a valid OpenAPI 3.1 document", async () => {
    expect(document.openapi).toBe("3.1.0");
    const result = await new Validator().validate(document as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  test("documents every route the app serves, under a server whose URL is the environment's base URL (env, 'default' by default)", () => {
    // The app's own route table, built as the server builds it; nothing is listed by hand.
    const app = buildApp({ stores: new Map(resources.map((resource) => [resource.path, {}])), access: {}, config: loadConfig({}, {}), log: () => {} } as unknown as Services);
    const served = app.routes.map((route) => `${route.method} ${route.path.replace(/:(\w+)/g, "{$1}")}`);
    // The environment is the server variable: the spec's {base_url} is the server URL, and paths hang under it.
    const [server] = document.servers as Array<{ url: string; variables: Record<string, { default: string }> }>;
    expect(document.servers.length).toBe(1);
    expect({ url: server!.url, variables: Object.keys(server!.variables), env: server!.variables.env!.default }).toEqual({ url: "/{env}", variables: ["env"], env: "default" });
    const documented = operations().map(({ path, method }) => `${method.toUpperCase()} /{env}${path}`);
    expect(served.filter((route) => !undocumented.has(route)).sort()).toEqual(documented.sort());
    // Status, its rejected records, cancel and the job list; per resource: import, list, get, delete, its deletions and
    // its export; webhooks: create, list, delete, test, and a job's deliveries; syncs: open, get, complete.
    expect(documented.length).toBe(4 + 6 * resources.length + 5 + 3);

    for (const { path, operation } of operations()) {
      expect(path.startsWith("/v2/")).toBe(true);
      expect(operation.parameters?.find((parameter) => parameter.name === "env")).toBeUndefined();
      expect(Object.keys(operation.responses)).toContain("401");
      expect(Object.keys(operation.responses)).toContain("429");
    }
  });

  test("every error answer is documented as Problem Details, every success with its schema", () => {
    for (const { path, operation } of operations()) {
      for (const [status, response] of Object.entries(operation.responses)) {
        const [type] = Object.keys(response.content ?? {});
        // 204 No Content, as its name says; an export streams NDJSON (each line a stored record) or CSV.
        const success = path.startsWith("/v2/exports/") ? "application/x-ndjson" : "application/json";
        expect(type).toBe(Number(status) >= 400 ? "application/problem+json" : status === "204" ? undefined : success);
        if (Number(status) >= 400) expect(JSON.stringify(resolved(response.content![type!]!.schema))).toContain("RFC 9457 Problem Details");
      }
    }
    const post = document.paths["/v2/assets"]!.post!;
    expect(post.parameters?.find((parameter) => parameter.name === "Idempotency-Key")).toMatchObject({ in: "header", required: false });
    expect(JSON.stringify(post.responses["202"])).toContain("Idempotent-Replayed");
    // 409: the sync named by ?sync= has ended.
    expect(Object.keys(post.responses).sort()).toEqual(["202", "400", "401", "405", "408", "409", "413", "415", "422", "429", "503", "507"]);
    expect(JSON.stringify(resolved(post.responses["202"]))).toContain("importJobStatus");
    expect(JSON.stringify(resolved(document.paths["/v2/status/{id}"]!.get!.responses["200"]))).toContain("recordCount");
    for (const resource of resources) {
      expect(JSON.stringify(resolved(document.paths[`/v2/${resource.path}`]!.post!.requestBody))).toContain('"name"');
      expect(JSON.stringify(resolved(document.paths[`/v2/${resource.path}/{id}`]!.get!.responses["200"]))).toContain("lastJobId");
      const exported = document.paths[`/v2/exports/${resource.path}`]!.get!.responses["200"]!;
      expect(Object.keys(exported.content ?? {})).toEqual(["application/x-ndjson", "text/csv"]);
      expect(JSON.stringify(resolved(exported))).toContain("lastJobId");
    }
  });

  test("the import examples succeed when sent in order, as someone trying Swagger UI would", async () => {
    // Swagger UI's URL: the server's, relative to the document's, with each variable at its default.
    const { url, variables } = document.servers[0] as { url: string; variables: Record<string, { default: string }> };
    const base = server.url + url.replace(/\{(\w+)\}/g, (_: string, name: string) => variables[name]!.default);
    expect(base).toBe(server.base);
    for (const resource of resources) {
      const example = document.paths[`/v2/${resource.path}`]!.post!.requestBody!.content["application/json"]!.example!;
      expect(example.length).toBeGreaterThan(0);
      const job = await importAndWait(base, resource.path, server.key, example);
      expect({ resource: resource.path, status: job.importJobStatus, rejected: job.output?.rejected }).toEqual({ resource: resource.path, status: "Succeeded", rejected: 0 });
    }
  });

  test("the Api-Key header is the security scheme, required everywhere", () => {
    expect(document.components.securitySchemes.ApiKey).toEqual({ type: "apiKey", in: "header", name: "Api-Key" });
    expect(document.security).toEqual([{ ApiKey: [] }]);
  });
});

describe("Swagger UI", () => {
  test("is served without a key, from this server alone: no CDN", async () => {
    const ui = await fetch(`${server.url}/swagger`);
    expect(ui.status).toBe(200);
    expect(ui.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const html = await ui.text();
    const sources = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]!);
    expect(sources.sort()).toEqual(["/swagger/assets/swagger-init.js", "/swagger/assets/swagger-ui-bundle.js", "/swagger/assets/swagger-ui.css"]);
    expect(await (await fetch(`${server.url}/swagger/assets/swagger-init.js`)).text()).toContain('url: "/swagger/json"');
    expect(html).not.toMatch(/https?:\/\//);
  });

  test("its script and stylesheet are served with their types", async () => {
    const script = await fetch(`${server.url}/swagger/assets/swagger-ui-bundle.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(await script.text()).toContain("SwaggerUIBundle");
    const style = await fetch(`${server.url}/swagger/assets/swagger-ui.css`);
    expect(style.status).toBe(200);
    expect(style.headers.get("content-type")).toBe("text/css; charset=utf-8");
    expect((await style.text()).length).toBeGreaterThan(10_000);
  });
});
