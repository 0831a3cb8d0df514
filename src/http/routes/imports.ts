import { Elysia, t } from "elysia";
import { jobDocument, jobDocumentSchema, retryAfterSeconds } from "../../jobs/document";
import { isTerminal, JobOperation } from "../../domain/job";
import type { ResourceDefinition } from "../../resources/definition";
import { resources } from "../../resources/registry";
import { maxErrorKeys } from "../../resources/validate";
import { authentication } from "../auth";
import { readBody, requireJson } from "../body";
import type { OpenAPIV3 } from "openapi-types";
import { bodyProblemResponses, environmentParameter, jsonBody, jsonResponse, problemResponses, resourceOperationIds } from "../openapi";
import { youSent } from "../paging";
import { resourceSchemas } from "../schemas";
import { conflict, idempotencyKeyReused, validationProblem, type Problem } from "../problem";
import type { Services } from "../services";
import { syncToJoin } from "./sync-state";

const syncEndedExample = conflict("Sync 1 is completed (by job 9 at 2026-01-01T12:00:00.000Z): it can no longer take imports. Open a new sync with POST /v2/syncs.");

const idempotencyKeyParameter: OpenAPIV3.ParameterObject = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description:
    "Any 1 to 255 visible ASCII characters, unique per request you mean (for example a UUID, or file and chunk). The same key with the same " +
    "path and body within 24 hours answers the job queued the first time (no second job), with Idempotent-Replayed: true; " +
    "the same key with another body, or on another path (an import's and a deletion's are different requests), is 422.",
  schema: { type: "string", minLength: 1, maxLength: 255, pattern: "^[\\x21-\\x7e]+$" },
};

const dryRunParameter: OpenAPIV3.ParameterObject = {
  name: "dryRun",
  in: "query",
  required: false,
  description:
    "true: a dry run. The job is queued and takes its turn like any other, then applies nothing: its output says what applying would have done " +
    "against the data as of its turn (status, counts: created/updated/unchanged for an import, deleted/notFound for a delete job; errors, rejected records), and its message starts with " +
    '"Dry run: nothing was applied.".',
  schema: { type: "boolean", default: false },
};

const syncParameter: OpenAPIV3.ParameterObject = {
  name: "sync",
  in: "query",
  required: false,
  description:
    "The id of an open sync of this resource (POST /v2/syncs): the job joins it, and the sync's completion keeps every record it sent (rejected ones too). " +
    "Any number of imports may join a sync, in order. A malformed id, one that names no sync of this environment, or a sync of another resource is 400 " +
    "(errors under `sync`); a sync that is completed or expired is 409 (open a new one). A dry run may join: what it sends counts as sent for a dry-run completion only (a mirror tried whole, nothing applied).",
  schema: { type: "integer", minimum: 1, example: 1 },
};

/** The optional dryRun query parameter: true, false (or absent), or a 400. */
export function readDryRun(value: string | undefined): boolean {
  if (value === undefined || value === "false") return false;
  if (value === "true") return true;
  throw validationProblem({ dryRun: [`'dryRun' must be true or false. ${youSent(value)}`] });
}

/** The optional Idempotency-Key header: undefined when absent, a 400 when malformed. */
function readIdempotencyKey(value: string | null): string | undefined {
  if (value === null) return undefined;
  if (!/^[\x21-\x7e]{1,255}$/.test(value)) {
    throw validationProblem({ "Idempotency-Key": ["'Idempotency-Key' must be 1 to 255 visible ASCII characters (no spaces), for example a UUID."] });
  }
  return value;
}

/** From the 202 to what a client does next with its job: stateful tools follow these instead of guessing ids. */
export const jobLinks: Record<string, OpenAPIV3.LinkObject> = {
  getJob: { operationId: "getJob", parameters: { id: "$response.body#/id" }, description: "Poll the job until it is terminal." },
  cancelJob: { operationId: "cancelJob", parameters: { id: "$response.body#/id" }, description: "Cancel the job while it is Pending." },
  listRejectedRecords: { operationId: "listRejectedRecords", parameters: { id: "$response.body#/id" }, description: "Once it has finished, the records it rejected." },
};

/** What a POST that queues a job says of itself in the document, beyond what every such POST shares. */
export type QueueRouteDocs = { operationId: string; summary: string; description: string; tag: string; requestBody: OpenAPIV3.RequestBodyObject; invalid?: Problem };

/**
 * A POST that queues a job of `resource` doing `operation` (an import's upsert, a delete job's delete) at `path`: one
 * way for both, so that the body's limits, its 400s, Idempotency-Key, ?dryRun and the 202 are the same (DECISIONS 13).
 */
export function queueRoute(services: Services, resource: ResourceDefinition, operation: JobOperation, path: string, docs: QueueRouteDocs) {
  return new Elysia().use(authentication(services)).post(
    path,
    async ({ request, environmentId, params, query, set }) => {
      requireJson(request.headers.get("content-type"));
      const idempotencyKey = readIdempotencyKey(request.headers.get("idempotency-key"));
      const dryRun = readDryRun(query.dryRun);
      if (operation !== JobOperation.Upsert && query.sync !== undefined) {
        throw validationProblem({ sync: [`Only an import joins a sync (POST /v2/${resource.path}?sync=<id>): the sync's completion deletes what its imports did not send.`] });
      }
      const syncId = query.sync === undefined ? undefined : await syncToJoin(services, environmentId, resource.path, query.sync);
      // Held until the intake has stored the body: until then its buffer lives on, here or in a worker thread.
      const upload = services.uploads.begin(environmentId);
      let result: Awaited<ReturnType<typeof services.intake.accept>>;
      try {
        const body = await readBody(request, services.config.maxBodyBytes, upload);
        result = await services.intake.accept({ environmentId, environment: params.env, resource, body, idempotencyKey, dryRun, operation, syncId });
      } finally {
        upload.end();
      }
      if (!result.ok && "idempotencyConflict" in result) throw idempotencyKeyReused();
      if (!result.ok) {
        const shown = Object.values(result.errors).reduce((sum, messages) => sum + messages.length, 0);
        const note = result.truncated
          ? `Only the first ${maxErrorKeys} fields with errors are listed (${shown} of ${result.errorCount} messages). Fix these and send again to see the rest.`
          : undefined;
        throw validationProblem(result.errors, note);
      }
      if (result.replayed) set.headers["idempotent-replayed"] = "true";
      set.status = 202;
      set.headers.location = `/${params.env}/v2/status/${result.job.id}`;
      // As every answer with a job that has not ended: when to poll it first (a replayed job may have ended).
      if (!isTerminal(result.job.status)) set.headers["retry-after"] = String(retryAfterSeconds(result.job));
      return jobDocument(result.job);
    },
    {
      parse: "none",
      params: t.Object({ env: environmentParameter }),
      query: t.Object({ dryRun: t.Optional(t.String()), sync: t.Optional(t.String()) }),
      detail: {
        parameters: operation === JobOperation.Upsert ? [idempotencyKeyParameter, dryRunParameter, syncParameter] : [idempotencyKeyParameter, dryRunParameter],
        requestBody: docs.requestBody,
        responses: {
          202: {
            ...jsonResponse(jobDocumentSchema, "Accepted: the job is queued; or, for a repeated Idempotency-Key, the job queued the first time.", {
              Location: { schema: { type: "string", example: "/default/v2/status/1" }, description: "The job's status URL, from the server's root." },
              "Idempotent-Replayed": { schema: { type: "string", enum: ["true"] }, description: "Present when the answer is the job of an earlier request with the same Idempotency-Key." },
              "Retry-After": { schema: { type: "integer" }, description: "Seconds to wait before the first poll of the status URL; absent when a replayed job has already ended." },
            }),
            links: jobLinks,
          },
          ...problemResponses(
            docs.invalid ? { status: 400, example: docs.invalid } : 400,
            401,
            ...(operation === JobOperation.Upsert ? [{ status: 409, description: "The sync named by ?sync= has ended (completed or expired): open a new one.", example: syncEndedExample }] : []),
            413,
            415,
            422,
            507,
          ),
          ...bodyProblemResponses(services.config),
        },
        operationId: docs.operationId,
        summary: docs.summary,
        tags: [docs.tag],
        description:
          docs.description +
          `Send at most 100 MB per request (under 8 MB is recommended). ` +
          `The server holds a limited number of request bodies in memory at once: an environment may send ${services.config.uploadsPerEnvironment} bodies over 64 KiB at a time (one more is a 429), ` +
          `and when the server's budget for all of them is spent, a body whose Content-Length does not fit is a 503; either comes with Retry-After, before the body is read. ` +
          `A chunked body (no Content-Length) is reserved as it arrives, and cut off with 503 if the budget runs out on the way: send a Content-Length. ` +
          `A body of which nothing arrives for ${services.config.bodyStallSeconds} seconds` +
          (services.config.bodyMinBytesPerSecond > 0 ? `, or that arrives at under ${services.config.bodyMinBytesPerSecond} bytes a second on average after those first seconds,` : "") +
          ` is cut off with 408.`,
      },
    },
  );
}

const importRoute = (services: Services, resource: ResourceDefinition) =>
  queueRoute(services, resource, JobOperation.Upsert, `/${resource.path}`, {
    operationId: resourceOperationIds(resource.jobType).importRecords,
    summary: `Import ${resource.noun} records`,
    tag: "Imports",
    requestBody: jsonBody(t.Array(resourceSchemas(resource).sent, { minItems: 1 }), resource.example),
    description:
      `Queues a batch of ${resource.noun} records as one ${resource.jobType} job and answers 202 with the job. ` +
      `Records are upserted by id when the job runs; poll the job's statusUrl until it is terminal. ` +
      `Unknown fields are ignored; no field's text may hold the NUL character (\\u0000), which is a 400; ` +
      `a lone surrogate (\\uD800 to \\uDFFF, not part of a pair) is taken as U+FFFD, as it is stored. `,
  });

export const importRoutes = (services: Services) =>
  resources.reduce((app, resource) => app.use(importRoute(services, resource)), new Elysia());
