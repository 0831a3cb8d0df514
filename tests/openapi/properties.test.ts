import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { importAndWait } from "../helpers/api";
import { brokenItemsOf, brokenQueryValuesOf, queryValuesOf, valuesOf, type Schema } from "../helpers/schema-values";
import { startTestServer, type TestServer } from "../helpers/server";

// The served document's promises, drawn from its own schemas and checked against the live server:
//   - what a schema allows is accepted (an import body: 202; query parameters: 200);
//   - what it forbids in one place is a 400 naming that place (`[index].field`, or the parameter);
//   - a method the document does not list on a path is a 405 whose Allow lists those it does.
// Each property is also run against a copy of the document with one promise planted wrong, and must fail there:
// a property that cannot fail proves nothing. A fixed seed makes a failure repeatable (CONTRACT_SEED picks another;
// CONTRACT_SCALE runs more cases).

const seed = Number(process.env.CONTRACT_SEED ?? 20261126);
const scale = Number(process.env.CONTRACT_SCALE ?? 1);
const runs = (count: number) => ({ seed, numRuns: Math.max(1, Math.round(count * scale)) });
/** For a planted document: enough cases to meet the planted promise, and no shrinking once it is met. */
const plantedRuns = { seed, numRuns: 600, endOnFailure: true };

type Parameter = { name: string; in: string; schema: Schema };
type Operation = { operationId: string; parameters?: Parameter[]; requestBody?: { content: Record<string, { schema: Schema }> }; responses: Record<string, unknown> };
type Document = { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, Schema> } };

let server: TestServer;
let served: Document;
let finishedJob: number;
beforeAll(async () => {
  server = await startTestServer();
  served = (await (await fetch(`${server.url}/swagger/json`)).json()) as Document;
  finishedJob = (await importAndWait(server.base, "subareas", server.key, [{ id: "north", name: "North" }])).id;
});
afterAll(() => server.close());

/** `node` with every $ref replaced by the schema it names. */
function resolved(document: Document, node: unknown): unknown {
  if (Array.isArray(node)) return node.map((item) => resolved(document, item));
  if (!node || typeof node !== "object") return node;
  const ref = (node as { $ref?: string }).$ref;
  if (ref) return resolved(document, document.components.schemas[ref.replace("#/components/schemas/", "")]);
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, resolved(document, value)]));
}

const operationsOf = (document: Document) =>
  Object.entries(document.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, operation]) => ({ path, method, operation: resolved(document, operation) as Operation })));

/** Each import operation (a body answered 202: a job): its path and the schema of one record of its body. */
const importsOf = (document: Document) =>
  operationsOf(document)
    .filter(({ operation }) => operation.requestBody && operation.responses["202"])
    .map(({ path, operation }) => ({ path, operationId: operation.operationId, record: operation.requestBody!.content["application/json"]!.schema.items! }));

/** Each GET with query parameters, its path made concrete (a finished job's id, whose rejected records it lists). */
const queriesOf = (document: Document) =>
  operationsOf(document)
    .filter(({ method, operation }) => method === "get" && operation.parameters?.some((parameter) => parameter.in === "query"))
    .map(({ path, operation }) => ({ path: path.replace("{id}", String(finishedJob)), operationId: operation.operationId, parameters: operation.parameters!.filter((parameter) => parameter.in === "query") }));

/** Each GET of one thing by the id in its path, with the id's schema. */
const readsById = (document: Document) =>
  operationsOf(document)
    .filter(({ method, operation }) => method === "get" && !operation.parameters?.some((parameter) => parameter.in === "query"))
    .flatMap(({ path, operation }) => operation.parameters!.filter((parameter) => parameter.in === "path").map(({ schema }) => ({ path, schema })));

const send = (path: string, init: RequestInit = {}) =>
  fetch(`${server.base}${path}`, { ...init, headers: { "api-key": server.key, "content-type": "application/json", ...(init.headers as Record<string, string>) } });

const errorsOf = async (response: Response) => ((await response.json()) as { errors?: Record<string, string[]> }).errors ?? {};

/** What a failed property printed, in one line: which document promise the server did not keep. */
const answerOf = async (response: Response) => `${response.status} ${(await response.text()).slice(0, 300)}`;

function acceptsWhatTheSchemaAllows(document: Document) {
  const imports = importsOf(document);
  const batches = fc.oneof(...imports.map(({ path, record }) => fc.record({ path: fc.constant(path), batch: fc.array(valuesOf(record), { minLength: 1, maxLength: 4 }) })));
  return fc.asyncProperty(batches, async ({ path, batch }) => {
    const response = await send(path, { method: "POST", body: JSON.stringify(batch) });
    if (response.status !== 202) throw new Error(`POST ${path}: ${await answerOf(response)}`);
  });
}

function refusesWhatTheSchemaForbids(document: Document) {
  const imports = importsOf(document);
  const cases = fc.oneof(
    ...imports.map(({ path, record }) =>
      fc.record({ path: fc.constant(path), valid: fc.array(valuesOf(record), { maxLength: 3 }), broken: brokenItemsOf(record), at: fc.nat() }),
    ),
  );
  return fc.asyncProperty(cases, async ({ path, valid, broken, at }) => {
    const index = at % (valid.length + 1);
    const batch = [...valid.slice(0, index), broken.value, ...valid.slice(index)];
    const response = await send(path, { method: "POST", body: JSON.stringify(batch) });
    // A broken object names its field; a broken id (a delete job's item) is named by its index alone.
    const expected = broken.key === "" ? `[${index}]` : `[${index}].${broken.key}`;
    if (response.status !== 400) throw new Error(`POST ${path} with ${expected} broken: ${await answerOf(response)}`);
    expect(Object.keys(await errorsOf(response))).toEqual([expected]);
  });
}

const url = (path: string, parameters: Record<string, string | undefined>) =>
  `${path}?${Object.entries(parameters).flatMap(([name, value]) => (value === undefined ? [] : [`${name}=${encodeURIComponent(value)}`])).join("&")}`;

function takesTheParametersTheSchemaAllows(document: Document) {
  const queries = queriesOf(document).map(({ path, parameters }) =>
    fc.record(Object.fromEntries(parameters.map(({ name, schema }) => [name, queryValuesOf(schema)])), { requiredKeys: [] }).map((query) => url(path, query)),
  );
  // Any id (of a job, or of a record) answers the thing, or 404 when there is no such thing: never a 400 or a 5xx.
  const ids = readsById(document).map(({ path, schema }) =>
    queryValuesOf(schema)
      .filter((id) => id !== "." && id !== "..")
      .map((id) => path.replace("{id}", encodeURIComponent(id))),
  );
  return fc.asyncProperty(fc.oneof(...queries, ...ids), async (path) => {
    const response = await send(path);
    if (response.status !== 200 && response.status !== 404) throw new Error(`GET ${path}: ${await answerOf(response)}`);
  });
}

function refusesTheQueriesTheSchemaForbids(document: Document) {
  const cases = fc.oneof(
    ...queriesOf(document).flatMap(({ path, parameters }) =>
      parameters.map(({ name, schema }) => fc.record({ path: fc.constant(path), name: fc.constant(name), value: brokenQueryValuesOf(schema) })),
    ),
  );
  return fc.asyncProperty(cases, async ({ path, name, value }) => {
    const response = await send(url(path, { [name]: value }));
    if (response.status !== 400) throw new Error(`GET ${url(path, { [name]: value })}: ${await answerOf(response)}`);
    expect(Object.keys(await errorsOf(response))).toEqual([name]);
  });
}

const methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"];
/** A concrete path for a documented one: a job id, or a record id (any text but the dot segments URLs resolve). */
const concrete = (path: string) =>
  path.includes("/status/{id}")
    ? fc.integer({ min: 1, max: 1e12 }).map((id) => path.replace("{id}", String(id)))
    : fc.string({ unit: "binary", minLength: 1, maxLength: 20 }).filter((id) => id !== "." && id !== "..").map((id) => path.replace("{id}", encodeURIComponent(id)));

function answers405ToUndocumentedMethods(document: Document) {
  const cases = fc.oneof(
    ...Object.entries(document.paths).flatMap(([path, operations]) => {
      const documented = Object.keys(operations).map((method) => method.toUpperCase());
      const allowed = [...new Set(documented.flatMap((method) => (method === "GET" ? ["GET", "HEAD"] : [method])))].sort();
      const others = methods.filter((method) => !allowed.includes(method));
      return others.length === 0 ? [] : [fc.record({ path: concrete(path), method: fc.constantFrom(...others), allowed: fc.constant(allowed.join(", ")) })];
    }),
  );
  return fc.asyncProperty(cases, async ({ path, method, allowed }) => {
    const response = await fetch(`${server.base}${path}`, { method, headers: { "api-key": server.key } });
    if (response.status !== 405 || response.headers.get("allow") !== allowed) {
      throw new Error(`${method} ${path}: ${response.status}, Allow: ${response.headers.get("allow")} (the document allows ${allowed})`);
    }
  });
}

/** The served document with one promise changed by `plant`. */
function planted(plant: (document: Document) => void): Document {
  const copy = structuredClone(served);
  plant(copy);
  return copy;
}

/** Sets `name`'s maxLength in every record's schema (sub areas, asset types, asset categories, assets). */
const nameMaxLength = (maxLength: number) => (document: Document) => {
  for (const schema of Object.values(document.components.schemas)) if (schema.properties?.name) schema.properties.name.maxLength = maxLength;
};
const listJobsLimit = (document: Document) => document.paths["/v2/jobs"]!.get!.parameters!.find((parameter) => parameter.name === "limit")!.schema;

describe("the server keeps the document's promises", () => {
  test("positive: every import body the schemas allow is accepted (202)", async () => {
    await fc.assert(acceptsWhatTheSchemaAllows(served), runs(120));
    // Planted: `name` up to 400 characters, where the server keeps to 255.
    const failure = await fc.check(acceptsWhatTheSchemaAllows(planted(nameMaxLength(400))), plantedRuns);
    expect(failure.failed).toBe(true);
    expect(String(failure.errorInstance)).toContain("'Name' must be 255 characters or fewer");
  }, 120_000);

  test("negative: every body with one field the schemas forbid is a 400 naming exactly that field", async () => {
    await fc.assert(refusesWhatTheSchemaForbids(served), runs(150));
    // Planted: `name` at most 100 characters, where the server takes 255.
    const failure = await fc.check(refusesWhatTheSchemaForbids(planted(nameMaxLength(100))), plantedRuns);
    expect(failure.failed).toBe(true);
    expect(String(failure.errorInstance)).toMatch(/POST \/v2\/\w+ with \[\d+\]\.name broken: 202/);
  }, 120_000);

  test("positive: every query parameter and path id the schemas allow is taken (200, or 404 for an id nothing has)", async () => {
    await fc.assert(takesTheParametersTheSchemaAllows(served), runs(150));
    const failure = await fc.check(takesTheParametersTheSchemaAllows(planted((document) => void (listJobsLimit(document).maximum = 5000))), plantedRuns);
    expect(failure.failed).toBe(true);
    expect(String(failure.errorInstance)).toContain("'Limit' must be a whole number from 1 to 1000");
  }, 120_000);

  test("negative: a query parameter the schemas forbid is a 400 naming it", async () => {
    await fc.assert(refusesTheQueriesTheSchemaForbids(served), runs(100));
    const failure = await fc.check(refusesTheQueriesTheSchemaForbids(planted((document) => void (listJobsLimit(document).maximum = 10))), plantedRuns);
    expect(failure.failed).toBe(true);
    expect(String(failure.errorInstance)).toMatch(/GET \/v2\/jobs\?limit=\d+: 200/);
  }, 120_000);

  test("methods: every method the document does not list on a path is a 405 whose Allow lists the ones it does", async () => {
    await fc.assert(answers405ToUndocumentedMethods(served), runs(100));
    // Planted: GET /v2/jobs left out of the document, though the server answers it.
    const failure = await fc.check(answers405ToUndocumentedMethods(planted((document) => void delete document.paths["/v2/jobs"]!.get)), plantedRuns);
    expect(failure.failed).toBe(true);
    expect(String(failure.errorInstance)).toMatch(/[A-Z]+ \/v2\/jobs: .* \(the document allows \)/);
  }, 120_000);
});
