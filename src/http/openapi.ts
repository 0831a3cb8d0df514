import { t, type TSchema } from "elysia";
import type { OpenAPIV3 } from "openapi-types";
import { documented, problemSchema } from "./schemas";
import {
  bodyTimeout,
  conflict,
  environmentBusy,
  idempotencyKeyReused,
  insufficientStorage,
  methodNotAllowed,
  notFound,
  payloadTooLarge,
  serverBusy,
  serviceUnavailable,
  tooManyFailedAttempts,
  unauthorized,
  unsupportedMediaType,
  validationProblem,
  type Problem,
} from "./problem";

/**
 * OpenAPI fragments for route `detail`s. Schemas go into the document only, not into Elysia's runtime
 * validation: import bodies are parsed and validated on worker threads, and answers are built from typed code.
 */

const problemDescriptions: Record<number, string> = {
  400: "The request is invalid; `errors` says where and why.",
  401: "The Api-Key header is missing or not a valid key for this environment.",
  404: "Not found (or it belongs to another environment).",
  405: "The path does not answer the method sent (never one the document lists for it); `Allow` lists those it does.",
  409: "The request conflicts with the state of the job (not finished yet, or no longer cancelable).",
  413: "The body is larger than the hard limit; split it into several requests.",
  415: "The body is not sent as application/json.",
  422: "The request cannot be carried out as it is: an Idempotency-Key already used for a different request, or a webhook URL the operator does not allow; `detail` says which.",
  429: "Too many wrong API keys came from this address; no key is checked until Retry-After seconds have passed.",
  503: "The server could not use its storage just now (the database is unreachable, say); nothing was accepted or changed. Send the request again after Retry-After seconds.",
  507: "The server's disk is full; nothing was accepted or changed.",
};

/**
 * Operation ids for a resource's routes, as SDK generators turn them into method names: importAssets, getAsset,
 * listAssets, deleteAssets, listDeletedAssets (from the job type, pluralized).
 */
export const resourceOperationIds = (jobType: string) => {
  const plural = jobType.endsWith("y") ? `${jobType.slice(0, -1)}ies` : `${jobType}s`;
  return {
    importRecords: `import${plural}`,
    getRecord: `get${jobType}`,
    listRecords: `list${plural}`,
    deleteRecords: `delete${plural}`,
    listDeletedRecords: `listDeleted${plural}`,
  };
};

// TypeBox schemas are JSON Schema objects: they stand in the document as they are, the named ones as $refs.
const asSchema = (schema: TSchema) => documented(schema) as OpenAPIV3.SchemaObject;

export const jsonBody = (schema: TSchema, example?: unknown): OpenAPIV3.RequestBodyObject => ({
  required: true,
  content: { "application/json": { schema: asSchema(schema), ...(example === undefined ? {} : { example }) } },
});

const environmentDescription = "The environment's slug (its base URL is /{env}); `default` is created on the first start.";

type Document = { servers?: OpenAPIV3.ServerObject[]; paths: Record<string, Record<string, unknown>> };
type PathOperation = { parameters?: Array<OpenAPIV3.ParameterObject | OpenAPIV3.ReferenceObject> };
const environmentPrefix = "/{env}";

/**
 * The document as clients want it: the environment is part of the base URL (the spec's `{base_url}`), a server
 * variable, rather than a parameter of every operation. Routes are registered under `/:env`, so the plugin writes
 * `/{env}/v2/...` paths; this moves the prefix into `servers`. The plugin's objects are left as they are (it keeps them).
 */
export function environmentAsServer<T extends Document>(document: T): T {
  const isEnvironment = (parameter: OpenAPIV3.ParameterObject | OpenAPIV3.ReferenceObject) => "in" in parameter && parameter.in === "path" && parameter.name === "env";
  const paths = Object.fromEntries(
    Object.entries(document.paths).map(([path, operations]) => {
      if (!path.startsWith(`${environmentPrefix}/`)) return [path, operations];
      const withoutEnvironment = Object.fromEntries(
        Object.entries(operations).map(([method, operation]) => {
          const { parameters } = operation as PathOperation;
          return [method, parameters ? { ...(operation as object), parameters: parameters.filter((parameter) => !isEnvironment(parameter)) } : operation];
        }),
      );
      return [path.slice(environmentPrefix.length), withoutEnvironment];
    }),
  );
  const server: OpenAPIV3.ServerObject = {
    url: environmentPrefix,
    description: "This importd server; the environment's base URL (`/default`, say).",
    variables: { env: { default: "default", description: environmentDescription } },
  };
  return { ...document, servers: [server], paths };
}

const httpMethods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

/**
 * Every operation of the document with the 405 a path answers to a method it does not list (app.ts), its Allow
 * header and an example with the path's own methods (a GET path answers HEAD too). OpenAPI has no responses per path,
 * only per operation: each operation of the path carries it, so that a tool that sends another method to the path
 * (Schemathesis does) finds the answer documented. The plugin's objects are left as they are.
 */
export function withMethodNotAllowed<T extends Document>(document: T): T {
  const paths = Object.fromEntries(
    Object.entries(document.paths).map(([path, operations]) => {
      const documented = Object.keys(operations).filter((key) => httpMethods.includes(key)).map((method) => method.toUpperCase());
      const allowed = [...new Set(documented.flatMap((method) => (method === "GET" ? ["GET", "HEAD"] : [method])))].sort();
      const refused = ["DELETE", "PUT", "PATCH", "POST"].find((method) => !allowed.includes(method)) ?? "TRACE";
      const response: OpenAPIV3.ResponseObject = {
        description: problemDescriptions[405]!,
        headers: { Allow: { schema: { type: "string", example: allowed.join(", ") }, description: "The methods this path answers (RFC 9110 10.2.1)." } },
        content: { "application/problem+json": { schema: asSchema(problemSchema), example: methodNotAllowed(refused, allowed).body() } },
      };
      const withIt = Object.fromEntries(
        Object.entries(operations).map(([key, operation]) => {
          if (!httpMethods.includes(key)) return [key, operation];
          const { responses } = operation as { responses?: Record<string, unknown> };
          return [key, { ...(operation as object), responses: { ...responses, 405: response } }];
        }),
      );
      return [path, withIt];
    }),
  );
  return { ...document, paths };
}

/**
 * A path segment (`{id}`). Elysia decodes it, and a malformed escape (`%ZZ`) decodes to nothing: this is the 400's
 * message, under the segment's name.
 */
export const pathParameter = t.String({ error: "This path segment holds a malformed escape: % must start two hex digits, such as %2F. Encode the value with encodeURIComponent." });

/** The `{env}` path segment; in the document, the server variable (see environmentAsServer). */
export const environmentParameter = pathParameter;

export const jsonResponse = (schema: TSchema, description: string, headers?: OpenAPIV3.ResponseObject["headers"], example?: unknown): OpenAPIV3.ResponseObject => ({
  description,
  content: { "application/json": { schema: asSchema(schema), ...(example === undefined ? {} : { example }) } },
  ...(headers ? { headers } : {}),
});

// One example per status, made by the same constructors the server answers with.
const problemExamples: Record<number, Problem> = {
  400: validationProblem({ "[0].subAreaId": ["'Sub Area Id' must not be empty."] }),
  401: unauthorized(),
  404: notFound("No job with this id exists in this environment (job documents are kept for a limited time after they finish)."),
  409: conflict("The job is still Processing: which records it rejects is known once it has finished. Poll its statusUrl, then ask again."),
  413: payloadTooLarge(100 * 1024 * 1024),
  415: unsupportedMediaType(null),
  422: idempotencyKeyReused(),
  429: tooManyFailedAttempts(60),
  503: serviceUnavailable("The server could not use its storage just now; nothing was accepted or changed. Send the request again."),
  507: insufficientStorage(),
};

const retryAfterHeader: OpenAPIV3.HeaderObject = { schema: { type: "integer" }, description: "Seconds to wait before sending the request again." };

/** Headers the server sends with a Problem of this status. */
const problemHeaders = (status: number): OpenAPIV3.ResponseObject["headers"] =>
  status === 401
    ? { "WWW-Authenticate": { schema: { type: "string" }, description: "The scheme: the key in the Api-Key header." } }
    : [429, 503, 507].includes(status)
      ? { "Retry-After": retryAfterHeader }
      : undefined;

/**
 * Problem Details answers, by status; `{ status, retryAfter: true }` for a status that carries Retry-After on this
 * route beyond those that always do (the 409 of a job's rejected records, say); `description` and `example` for a
 * status that means more on this route than it does everywhere (the 429 and 503 of a request body, say).
 */
export const problemResponses = (
  ...statuses: Array<number | { status: number; retryAfter?: true; description?: string; example?: Problem }>
): Record<string, OpenAPIV3.ResponseObject> =>
  Object.fromEntries(
    statuses.map((entry) => {
      const status = typeof entry === "number" ? entry : entry.status;
      const headers = typeof entry !== "number" && entry.retryAfter ? { "Retry-After": retryAfterHeader } : problemHeaders(status);
      const example = ((typeof entry === "number" ? undefined : entry.example) ?? problemExamples[status])?.body();
      return [
        status,
        {
          description: (typeof entry === "number" ? undefined : entry.description) ?? problemDescriptions[status] ?? "Error.",
          content: { "application/problem+json": { schema: asSchema(problemSchema), ...(example ? { example } : {}) } },
          ...(headers ? { headers } : {}),
        },
      ];
    }),
  );

/**
 * The answers of an operation that reads a request body (imports, a webhook subscription), beyond the usual ones:
 * a body refused before it is read because too many are in flight (429, 503), or cut off because it stalled (408).
 */
export const bodyProblemResponses = (limits: { uploadsPerEnvironment: number; bodyStallSeconds: number; bodyMinBytesPerSecond: number }) =>
  problemResponses(
    {
      status: 408,
      description:
        `The request body stopped arriving (nothing for ${limits.bodyStallSeconds} seconds)` +
        (limits.bodyMinBytesPerSecond > 0 ? `, or arrived at under ${limits.bodyMinBytesPerSecond} bytes a second on average after those first ${limits.bodyStallSeconds} seconds` : "") +
        ": nothing was accepted, and the connection is closed. Send the request again.",
      example: bodyTimeout({ stallSeconds: limits.bodyStallSeconds, minBytesPerSecond: limits.bodyMinBytesPerSecond }, "stalled"),
    },
    {
      status: 429,
      description:
        "Too many wrong API keys came from this address (no key is checked until Retry-After seconds have passed); or this environment already has as many request " +
        `bodies over 64 KiB in flight as it may (${limits.uploadsPerEnvironment}), or as many bytes of them as its share of the server's budget (half of it): the body was not read, ` +
        "nothing was accepted, and the connection is closed. Send it again after Retry-After seconds; `detail` says which.",
      example: environmentBusy(`This environment already has ${limits.uploadsPerEnvironment} request bodies in flight, the most it may have at once. Send this one again when one of them has been answered.`),
    },
    {
      status: 503,
      description:
        "The server is holding as many request bodies in memory as it may, and this one's Content-Length (or a chunked body's growing buffer) does not fit " +
        "in what is left: the body was not read (or no more of it), nothing was accepted, and the connection is closed. Or the server could not use its storage just now; " +
        "nothing was accepted or changed. Either way, send the request again after Retry-After seconds.",
      example: serverBusy("The server is holding as many request bodies in memory as it may just now; nothing of this one was read or accepted. Send it again after Retry-After seconds."),
    },
  );
