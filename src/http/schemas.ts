// The shapes a client handles, named: the OpenAPI document defines each once under components.schemas and
// refers to it with $ref everywhere else, so that generated clients get one type per shape (JobDocument,
// Problem, Asset, …) instead of a copy per operation.
import { Type } from "@sinclair/typebox";
import { t, type TSchema } from "elysia";
import { jobDocumentSchema, jobOutputSchema, recordErrorSchema } from "../jobs/document";
import type { ResourceDefinition } from "../resources/definition";
import { resources } from "../resources/registry";
import { maxIdLength, requiredText } from "../resources/validate";
import { webhookEvents } from "../webhooks/events";
import { jobOperations, jobStatuses, syncStates, type SyncState } from "../domain/job";

/**
 * A JSON object of any keys whose values are `values`, as `additionalProperties`: generators make that a typed map
 * (t.Record writes `patternProperties`, which they read as a map of anything).
 */
const map = (values: TSchema, description: string) => t.Object({}, { additionalProperties: values, description });

export const problemSchema = t.Object(
  {
    type: t.String(),
    title: t.String(),
    status: Type.Integer(),
    detail: t.Optional(t.String()),
    errors: t.Optional(
      map(t.Array(t.String()), "Only on a 400: field path (`[index].field`, `[index].geolocation.field`, or `$` for the body) → messages."),
    ),
    deletedByJobId: t.Optional(Type.Integer({ description: "Only on the 404 of a deleted record: the delete job that deleted it." })),
    deletedAt: t.Optional(t.String({ format: "date-time", description: "Only on the 404 of a deleted record: when it was deleted." })),
  },
  { description: "RFC 9457 Problem Details." },
);

export const rejectedRecordSchema = t.Object({
  index: Type.Integer({ description: "The record's index in the batch." }),
  id: t.Union([t.String(), t.Null()], { description: "The record's id, as sent." }),
  field: t.String({ description: "The field at fault, or `$` when the whole batch was refused." }),
  message: t.String(),
  record: map(t.Unknown(), "The record as it was sent: every field, unknown ones and nulls included."),
});

/** A page of a list: its items, and the cursor of the next page (null on the last). */
const pageOf = (items: TSchema) => t.Object({ items: t.Array(items), nextCursor: t.Union([t.String(), t.Null()], { description: "Pass it as `after` for the next page; null on the last page." }) });

type JsonSchema = { type?: string; properties?: Record<string, JsonSchema>; required?: string[]; items?: JsonSchema; [key: string]: unknown };

/**
 * A request schema as the server reads requests: an optional field may also be null (DECISIONS 3: null counts
 * as missing), at any depth. The runtime checker strips nulls first, so it keeps the schema as it is.
 */
export function nullableOptionals(schema: TSchema): TSchema {
  const walk = (node: JsonSchema): JsonSchema => {
    if (node.type === "array" && node.items) return { ...node, items: walk(node.items) };
    if (node.type !== "object" || !node.properties) return node;
    const required = new Set(node.required ?? []);
    const properties = Object.fromEntries(
      Object.entries(node.properties).map(([name, property]) => [name, required.has(name) ? walk(property) : { anyOf: [walk(property), { type: "null" }] }]),
    );
    return { ...node, properties };
  };
  return walk(JSON.parse(JSON.stringify(schema)) as JsonSchema) as unknown as TSchema;
}

/** Each resource's shapes: the record as sent, as stored (with updatedAt and lastJobId), and a page of those. */
type ResourceSchemas = { sent: TSchema; stored: TSchema; page: TSchema };
const byResource = new Map<string, ResourceSchemas>(
  resources.map((resource) => {
    const stored = t.Composite([
      resource.schema,
      t.Object({ updatedAt: t.String({ format: "date-time" }), lastJobId: Type.Integer({ description: "The job that last wrote this record." }) }),
    ]);
    return [resource.path, { sent: nullableOptionals(resource.schema), stored, page: pageOf(stored) }];
  }),
);
export const resourceSchemas = (resource: ResourceDefinition): ResourceSchemas => byResource.get(resource.path)!;

export const jobPageSchema = pageOf(jobDocumentSchema);

/** A delete job's body: the ids of the records to delete. */
export const idListSchema = t.Array(t.String(requiredText(maxIdLength, "A record's id, as it was imported.")), {
  minItems: 1,
  description: "The ids of the records to delete, as they were imported: each not blank, at most 64 characters.",
  examples: [["PIPE-0001", "VALVE-0001"]],
});

export const tombstoneSchema = t.Object(
  {
    id: t.String({ description: "The deleted record's id." }),
    deletedAt: t.String({ format: "date-time" }),
    deletedByJobId: Type.Integer({ description: "The delete job that deleted it." }),
  },
  { description: "A record that was deleted, and not imported again since." },
);
// Not pageOf: every page, the last too, has a resumeCursor (routes/deletions.ts), so that a reader can follow deletions over time.
export const tombstonePageSchema = t.Object({
  items: t.Array(tombstoneSchema),
  nextCursor: t.Union([t.String(), t.Null()], { description: "Pass it as `after` for the next page; null on the last page." }),
  resumeCursor: t.String({
    description:
      "Where this page ends in the order of deletions, on every page, the last one too: keep the last you were given, and pass it as `after` later " +
      'to get only the deletions since ("0" when there has been none).',
  }),
});
export const rejectedRecordPageSchema = pageOf(rejectedRecordSchema);

/** The longest webhook URL taken. */
export const maxUrlLength = 2048;

const eventsSchema = t.Array(Type.Unsafe<string>({ type: "string", enum: [...webhookEvents] }), {
  minItems: 1,
  uniqueItems: true,
  description: "The events to send; all of them when left out.",
});

export const webhookSchema = t.Object(
  {
    id: Type.Integer(),
    url: t.String({ format: "uri" }),
    events: eventsSchema,
    createdAt: t.String({ format: "date-time" }),
    disabledAt: t.Union([t.String({ format: "date-time" }), t.Null()], { description: "Set when the receiver answered 410 Gone: nothing more is sent to it." }),
    disabledReason: t.Union([t.String(), t.Null()]),
  },
  { description: "A webhook subscription of the environment." },
);
export const createdWebhookSchema = t.Composite([webhookSchema, t.Object({ secret: t.String({ description: "The signing secret (Standard Webhooks, whsec_…). Shown only in this answer: keep it." }) })]);
export const webhookRequestSchema = t.Object({
  // Not blank, no NUL, at most maxUrlLength characters: a text field as every other the API takes, which the route checks.
  url: t.String(requiredText(maxUrlLength, "Where events are POSTed: an http or https URL the operator allows (--webhook-allow).")),
  events: t.Optional(eventsSchema),
});
export const attemptSchema = t.Object({
  attempt: Type.Integer(),
  at: t.String({ format: "date-time" }),
  status: t.Union([Type.Integer(), t.Null()], { description: "The receiver's status code; null when there was no answer." }),
  error: t.Union([t.String(), t.Null()], { description: "Why the attempt did not deliver, when it did not." }),
  durationMs: Type.Integer(),
});
export const deliverySchema = t.Object({
  messageId: t.String({ description: "The webhook-id header: the same at every attempt." }),
  webhookId: t.Union([Type.Integer(), t.Null()], { description: "The subscription; null once it was removed." }),
  event: Type.Unsafe<string>({ type: "string", enum: [...webhookEvents] }),
  url: t.String(),
  status: Type.Unsafe<string>({ type: "string", enum: ["pending", "delivered", "failed", "canceled"], description: "failed: given up after 24 hours, or the receiver answered 410." }),
  attempts: t.Array(attemptSchema),
  createdAt: t.String({ format: "date-time" }),
  nextAttemptAt: t.Union([t.String({ format: "date-time" }), t.Null()]),
  completedAt: t.Union([t.String({ format: "date-time" }), t.Null()]),
});
// The receiver's status and time, never its body (DECISIONS 15): shown, it would make importd a way to read what a
// service the operator allowed answers.
export const pingResultSchema = t.Object({
  delivered: t.Boolean({ description: "The receiver answered 2xx within 10 s." }),
  messageId: t.String({ description: "The ping's webhook-id header." }),
  status: t.Union([Type.Integer(), t.Null()], { description: "The receiver's status code; null when there was no answer." }),
  error: t.Union([t.String(), t.Null()], { description: "Why the ping did not deliver, when it did not." }),
  durationMs: Type.Integer({ description: "From the start of the attempt to the receiver's answer (or to its failure)." }),
});

// Syncs (DECISIONS 13's mirror).
const resourcePathSchema = (description: string) => Type.Unsafe<string>({ type: "string", enum: resources.map((resource) => resource.path), examples: ["assets"], description });

export const syncRequestSchema = t.Object(
  { resource: resourcePathSchema("The resource to mirror, by its path: the imports that join the sync are POSTs to /v2/<resource>?sync=<id>.") },
  { examples: [{ resource: "assets" }] },
);

export const syncJobSchema = t.Object({
  id: Type.Integer(),
  operation: Type.Unsafe<string>({ type: "string", enum: [...jobOperations], examples: ["upsert"], description: "upsert: an import that joined the sync; syncCompletion: a completion." }),
  importJobStatus: Type.Unsafe<string>({ type: "string", enum: [...jobStatuses], examples: ["Succeeded"] }),
  dryRun: t.Boolean(),
  recordCount: Type.Integer(),
});

export const syncSchema = t.Object(
  {
    id: Type.Integer(),
    resource: resourcePathSchema("The resource it mirrors."),
    state: Type.Unsafe<SyncState>({
      type: "string",
      enum: [...syncStates],
      examples: ["open"],
      description:
        "open: imports may join it and it may be completed; completed: a completion deleted what the sync did not send (it ended); " +
        "expired: not completed within 24 hours of opening, nothing deleted (it ended). An ended sync takes no more imports or completions: open a new one.",
    }),
    url: t.String({ examples: ["/v2/syncs/1"], description: "Relative to the environment's base URL." }),
    createdAt: t.String({ format: "date-time" }),
    expiresAt: t.String({ format: "date-time", description: "24 hours after createdAt: a sync not completed by then expires, and nothing is deleted." }),
    completedAt: t.Union([t.String({ format: "date-time" }), t.Null()], { description: "When its completion ended it; null while open, and for an expired sync." }),
    completedByJobId: t.Union([Type.Integer(), t.Null()], { description: "The completion job that ended it." }),
    recordsSent: Type.Integer({ description: "Distinct record ids the sync's jobs have sent so far (rejected records included: a sent record is not deleted); when it ended, as they were then." }),
    jobs: t.Array(syncJobSchema, { description: "The sync's jobs in the environment's order: the imports that joined it, and its completions." }),
    lastCompletion: t.Union([jobDocumentSchema, t.Null()], { description: "The last completion queued (dry runs included), as GET /v2/status/{id} shows it; null before the first." }),
  },
  { description: "A sync: a mirror of a resource in the making (DECISIONS 13)." },
);

export const webhookListSchema = t.Object({ items: t.Array(webhookSchema) });
export const deliveryListSchema = t.Object({ items: t.Array(deliverySchema) });

const names = new Map<object, string>([
  [jobDocumentSchema, "JobDocument"],
  [jobOutputSchema, "JobOutput"],
  [recordErrorSchema, "RecordError"],
  [problemSchema, "Problem"],
  [rejectedRecordSchema, "RejectedRecord"],
  [jobPageSchema, "JobPage"],
  [rejectedRecordPageSchema, "RejectedRecordPage"],
  [idListSchema, "IdList"],
  [tombstoneSchema, "Tombstone"],
  [tombstonePageSchema, "TombstonePage"],
  [webhookSchema, "Webhook"],
  [createdWebhookSchema, "CreatedWebhook"],
  [webhookRequestSchema, "WebhookRequest"],
  [webhookListSchema, "WebhookList"],
  [attemptSchema, "WebhookAttempt"],
  [deliverySchema, "WebhookDelivery"],
  [deliveryListSchema, "WebhookDeliveryList"],
  [pingResultSchema, "WebhookPing"],
  [syncRequestSchema, "SyncRequest"],
  [syncJobSchema, "SyncJob"],
  [syncSchema, "Sync"],
  ...resources.flatMap((resource) => {
    const { sent, stored, page } = resourceSchemas(resource);
    return [
      [sent, resource.jobType],
      [stored, `Stored${resource.jobType}`],
      [page, `${resource.jobType}Page`],
    ] as Array<[object, string]>;
  }),
]);

/** A schema as the document writes it: a named one as a $ref, and the named ones inside any other too. */
export function documented(schema: unknown, root = false): unknown {
  if (schema && typeof schema === "object") {
    const name = names.get(schema);
    if (name && !root) return { $ref: `#/components/schemas/${name}` };
    if (Array.isArray(schema)) return schema.map((item) => documented(item));
    return Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, documented(value)]));
  }
  return schema;
}

/** components.schemas: every named shape, itself written with $refs to the others. */
export const componentSchemas = () => Object.fromEntries([...names].map(([schema, name]) => [name, documented(schema, true)]));
