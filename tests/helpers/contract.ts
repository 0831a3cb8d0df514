import addFormats from "ajv-formats";
import { OpenAPIBackend, SetMatchType, type Document, type Operation } from "openapi-backend";

/**
 * Every answer a test receives from a test server, checked against the OpenAPI document that server serves, by
 * openapi-backend (a validator from the npm registry, not ours): the status must be documented for the operation,
 * the Content-Type must be the documented one, the body must match its schema, and every header the server adds
 * must be declared with a value of its type. The server and its document cannot drift apart unnoticed.
 *
 * startTestServer registers each server; the first registration wraps the global fetch. An answer that does not
 * match makes that fetch throw, so the test that got it fails where it asked.
 */

type Responses = Record<string, { content?: Record<string, unknown> }>;
type Paths = Record<string, Record<string, { responses?: Responses }>>;
type Checker = { api: OpenAPIBackend; paths: Paths };

const servers = new Map<string, Promise<Checker>>();
const checkers = new Map<string, Promise<Checker>>();
let checked = 0;

// What HTTP itself adds (Bun, Elysia, the transport): not the API's to declare.
// With them, the headers every answer carries for the browser's sake (security-headers.ts), not the API's.
const transportHeaders = new Set(["content-type", "content-length", "date", "connection", "keep-alive", "transfer-encoding", "vary", "x-content-type-options", "strict-transport-security"]);

/** Answers from `origin` are checked from now on, against the document it serves at /swagger/json. */
export function checkAnswersOf(origin: string) {
  wrapFetch();
  servers.set(origin, loadDocument(origin));
}

export function stopChecking(origin: string) {
  servers.delete(origin);
}

/** How many answers were checked (so a test can show the checker is at work). */
export const answersChecked = () => checked;

let plain: typeof fetch | undefined;

function wrapFetch() {
  if (plain) return;
  const unwrapped = (plain = globalThis.fetch);
  const wrapped = async (input: string | URL | Request, init?: RequestInit) => {
    const response = await unwrapped(input, init);
    const url = new URL(input instanceof Request ? input.url : input);
    const checker = servers.get(url.origin);
    if (!checker) return response;
    const method = (init?.method ?? (input instanceof Request ? input.method : "GET")).toLowerCase();
    const problems = await mismatches(await checker, method, url.pathname, response);
    if (problems.length > 0) throw new Error(`${method.toUpperCase()} ${url.pathname} answered ${response.status}, which the OpenAPI document does not allow:\n  ${problems.join("\n  ")}`);
    return response;
  };
  globalThis.fetch = Object.assign(wrapped, { preconnect: unwrapped.preconnect });
}

// Every server serves the same document: one validator per distinct text.
async function loadDocument(origin: string): Promise<Checker> {
  const text = await (await plain!(`${origin}/swagger/json`)).text();
  let checker = checkers.get(text);
  if (!checker) {
    checker = buildChecker(JSON.parse(text) as Document);
    checkers.set(text, checker);
  }
  return checker;
}

async function buildChecker(document: Document): Promise<Checker> {
  // openapi-backend validates application/json bodies only: its copy of the document also files each
  // `+json` answer (Problem Details) under application/json, so those bodies are checked too. Which media type
  // the server may send is checked against the document itself.
  const copy = structuredClone(document);
  for (const operations of Object.values(copy.paths as Paths)) {
    for (const operation of Object.values(operations)) {
      for (const response of Object.values(operation.responses ?? {})) {
        const json = Object.entries(response.content ?? {}).find(([type]) => type.endsWith("+json"));
        if (json && !response.content!["application/json"]) response.content!["application/json"] = json[1];
      }
    }
  }
  // quick: the document is checked by its own tests (tests/http/openapi.test.ts); the validator's built-in check
  // knows OpenAPI 3.0 only.
  const api = new OpenAPIBackend({ definition: copy, quick: true, ajvOpts: { allErrors: true }, customizeAjv: (ajv) => (addFormats(ajv), ajv) });
  await api.init();
  return { api, paths: document.paths as Paths };
}

async function mismatches({ api, paths }: Checker, method: string, pathname: string, response: Response): Promise<string[]> {
  // The document's server is /{env}: its paths start after the environment's slug.
  const path = pathname.replace(/^\/[^/]+(?=\/v2\/)/, "");
  const operation = api.router.matchOperation({ method, path, headers: {} }) as Operation | undefined;
  if (!operation?.operationId) return []; // not an API operation (the document itself, probes, unknown routes)
  checked++;
  const documented = paths[operation.path]?.[method]?.responses?.[response.status];
  if (!documented) return [`status ${response.status} is not documented for ${operation.operationId}`];
  const problems: string[] = [];
  const type = response.headers.get("content-type")?.split(";")[0]!.trim();
  const types = Object.keys(documented.content ?? {});
  if (type && !types.includes(type)) problems.push(`Content-Type ${type} is not one of the documented ${types.join(", ") || "(none: no body)"}`);
  // A body that streams (an export's NDJSON or CSV) is left to the test to read as it comes: read here, whole, before
  // the test gets the answer, it would no longer stream. Its media type and headers are still checked.
  if (type?.endsWith("json") && type !== "application/x-ndjson") {
    const text = await response.clone().text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return [...problems, `the body is not JSON: ${text.slice(0, 200)}`];
    }
    const result = api.validator.validateResponse(body, operation, response.status);
    for (const error of result.errors ?? []) problems.push(`body${error.instancePath} ${error.message} (${JSON.stringify(error.params)}): ${JSON.stringify(body).slice(0, 300)}`);
  }
  const headers = Object.fromEntries([...response.headers].filter(([name]) => !transportHeaders.has(name)));
  // Subset: every header the server added is declared for this status, and its value has the declared type.
  const result = api.validator.validateResponseHeaders(headers, operation, { statusCode: response.status, setMatchType: SetMatchType.Subset });
  for (const error of result.errors ?? []) problems.push(`headers${error.instancePath} ${error.message} (${JSON.stringify(error.params)}): ${JSON.stringify(headers)}`);
  return problems;
}
