import { t, type TSchema } from "elysia";
import { Type } from "@sinclair/typebox";
import type { OpenAPIV3 } from "openapi-types";

/**
 * OpenAPI fragments for route `detail`s. Schemas go into the document only, not into Elysia's runtime
 * validation: import bodies are parsed and validated on worker threads, and answers are built from typed code.
 */

export const problemSchema = t.Object(
  {
    type: t.String({ examples: ["https://tools.ietf.org/html/rfc9110#section-15.5.1"] }),
    title: t.String({ examples: ["One or more validation errors occurred."] }),
    status: Type.Integer({ examples: [400] }),
    detail: t.Optional(t.String()),
    errors: t.Optional(
      t.Record(t.String(), t.Array(t.String()), {
        description: "Field path (`[index].field`, `[index].geolocation.field`, or `$` for the body) → messages.",
        examples: [{ "[0].subAreaId": ["'Sub Area Id' must not be empty."] }],
      }),
    ),
  },
  { description: "RFC 9457 Problem Details." },
);

const problemDescriptions: Record<number, string> = {
  400: "The request is invalid; `errors` says where and why.",
  401: "The Api-Key header is missing or not a valid key for this environment.",
  404: "Not found (or it belongs to another environment).",
  409: "The request conflicts with the state of the job (it has not finished yet).",
  413: "The body is larger than the hard limit; split it into several requests.",
  415: "The body is not sent as application/json.",
  422: "The Idempotency-Key was already used for a different request.",
  429: "Too many wrong API keys came from this address; no key is checked until Retry-After seconds have passed.",
  503: "The batch could not be stored just now; nothing was accepted. Retry after Retry-After seconds.",
  507: "The server's disk is full; nothing was accepted.",
};

/**
 * Operation ids for a resource's routes, as SDK generators turn them into method names: importAssets, getAsset,
 * listAssets (from the job type, pluralized).
 */
export const resourceOperationIds = (jobType: string) => {
  const plural = jobType.endsWith("y") ? `${jobType.slice(0, -1)}ies` : `${jobType}s`;
  return { importRecords: `import${plural}`, getRecord: `get${jobType}`, listRecords: `list${plural}` };
};

// TypeBox schemas are JSON Schema objects, so they can stand in the document as they are.
const asSchema = (schema: TSchema) => schema as unknown as OpenAPIV3.SchemaObject;

export const jsonBody = (schema: TSchema, example?: unknown): OpenAPIV3.RequestBodyObject => ({
  required: true,
  content: { "application/json": { schema: asSchema(schema), ...(example === undefined ? {} : { example }) } },
});

const environmentDescription = "The environment's slug (its base URL is /{env}); `default` is created on the first start.";

/** The `{env}` path segment, prefilled with the environment every server starts with. */
export const environmentParameter = t.String({ description: environmentDescription, default: "default" });

/** The same, for routes whose `detail.parameters` are written out (the plugin then takes them as they are). */
export const environmentPathParameter: OpenAPIV3.ParameterObject = {
  name: "env",
  in: "path",
  required: true,
  description: environmentDescription,
  schema: { type: "string", default: "default" },
};

export const jsonResponse = (schema: TSchema, description: string, headers?: OpenAPIV3.ResponseObject["headers"]): OpenAPIV3.ResponseObject => ({
  description,
  content: { "application/json": { schema: asSchema(schema) } },
  ...(headers ? { headers } : {}),
});

export const problemResponses = (...statuses: number[]): Record<string, OpenAPIV3.ResponseObject> =>
  Object.fromEntries(
    statuses.map((status) => [
      status,
      { description: problemDescriptions[status] ?? "Error.", content: { "application/problem+json": { schema: asSchema(problemSchema) } } },
    ]),
  );
