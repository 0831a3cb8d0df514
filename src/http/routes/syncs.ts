import { Elysia, t } from "elysia";
import type { OpenAPIV3 } from "openapi-types";
import { defaultMaxDeletePercent, isTerminal, JobOperation, syncLifetimeMs } from "../../domain/job";
import { jobDocument, jobDocumentSchema, retryAfterSeconds } from "../../jobs/document";
import type { CompletionLimits } from "../../jobs/syncs";
import { resourceByPath, resources } from "../../resources/registry";
import type { SyncView } from "../../store/ports";
import { authentication } from "../auth";
import { readBody, requireJson } from "../body";
import { environmentParameter, jsonBody, jsonResponse, pathParameter, problemResponses } from "../openapi";
import { youSent } from "../paging";
import { conflict, validationProblem } from "../problem";
import { syncRequestSchema, syncSchema } from "../schemas";
import { retainedSince, type Services } from "../services";
import { jobLinks, readDryRun } from "./imports";
import { refuseEnded, syncIdFormat, syncInPath, syncNotFound, syncState } from "./sync-state";

// Syncs (DECISIONS 13's mirror): open one, send the resource's records in it with ?sync=<id> on ordinary imports, then
// complete it. The collection stands beside /v2/status: a record id is any string, so /v2/<resource>/sync would shadow
// a record of that name.

const resourcePaths = resources.map((resource) => resource.path);

/** The body of POST /v2/syncs: the resource to mirror (400 otherwise, keyed by field). */
function readSyncRequest(body: Uint8Array): string {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(body));
  } catch {
    throw validationProblem({ $: ['The body is not valid JSON. Send an object such as {"resource": "assets"}.'] });
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw validationProblem({ $: ['The body must be a JSON object naming the resource to mirror, such as {"resource": "assets"}.'] });
  const { resource } = value as { resource?: unknown };
  if (typeof resource !== "string" || !resourcePaths.includes(resource)) {
    const sent = resource === undefined ? "You sent none." : typeof resource === "string" ? youSent(resource) : `You sent ${JSON.stringify(resource)}.`;
    throw validationProblem({ resource: [`'Resource' must be the path of the resource to mirror, one of: ${resourcePaths.join(", ")}. ${sent}`] });
  }
  return resource;
}

/** ?maxDeletePercent= (a whole number from 0 to 100) or ?maxDelete= (a whole number from 0), not both: 400 otherwise. */
function readLimits(query: { maxDeletePercent?: string; maxDelete?: string }): CompletionLimits {
  const errors: Record<string, string[]> = {};
  const whole = /^(0|[1-9][0-9]{0,8})$/;
  if (query.maxDeletePercent !== undefined && !(whole.test(query.maxDeletePercent) && Number(query.maxDeletePercent) <= 100)) {
    errors.maxDeletePercent = [`'Max Delete Percent' must be a whole number from 0 to 100: the share of the resource's records the completion may delete. ${youSent(query.maxDeletePercent)}`];
  }
  if (query.maxDelete !== undefined && !whole.test(query.maxDelete)) {
    errors.maxDelete = [`'Max Delete' must be a whole number from 0: how many records the completion may delete. ${youSent(query.maxDelete)}`];
  }
  if (Object.keys(errors).length > 0) throw validationProblem(errors);
  if (query.maxDeletePercent !== undefined && query.maxDelete !== undefined) {
    throw validationProblem({ maxDelete: ["Give maxDeletePercent or maxDelete, not both: one limit says how much the completion may delete."] });
  }
  if (query.maxDelete !== undefined) return { maxDelete: Number(query.maxDelete) };
  return { maxDeletePercent: query.maxDeletePercent === undefined ? defaultMaxDeletePercent : Number(query.maxDeletePercent) };
}

/** A sync as GET /v2/syncs/{id} answers it. `lastCompletion`: its last completion job, as its status says. */
async function syncDocument(services: Services, environmentId: number, view: SyncView) {
  const completions = view.jobs.filter((job) => job.operation === JobOperation.SyncCompletion);
  const last = completions.at(-1);
  const lastJob = last && (await services.jobs.find(environmentId, last.id, retainedSince(services.config)));
  return {
    id: view.id,
    resource: view.resource,
    state: syncState(view),
    url: `/v2/syncs/${view.id}`,
    createdAt: view.createdAt,
    expiresAt: view.expiresAt,
    completedAt: view.completedAt,
    completedByJobId: view.completedByJobId,
    recordsSent: view.recordsSent ?? view.recordsMarked,
    jobs: view.jobs.map(({ id, operation, status, dryRun, recordCount }) => ({ id, operation, importJobStatus: status, dryRun, recordCount })),
    lastCompletion: lastJob ? jobDocument(lastJob) : null,
  };
}

const syncIdParameter: OpenAPIV3.ParameterObject = {
  name: "id",
  in: "path",
  required: true,
  description: "The sync's id, as POST /v2/syncs answered it. Any other value names no sync: 404.",
  schema: { type: "integer", minimum: 1, example: 1 },
};

const syncNotFoundExample = syncNotFound();
const syncEndedExample = conflict(
  "Sync 1 expired at 2026-01-02T12:00:00.000Z (a sync must be completed within 24 hours of opening); nothing was deleted, and it can no longer be completed. Open a new sync with POST /v2/syncs and send the records again.",
);

export const syncRoutes = (services: Services) =>
  new Elysia()
    .use(authentication(services))
    .post(
      "/syncs",
      async ({ request, environmentId, params, set }) => {
        requireJson(request.headers.get("content-type"));
        const upload = services.uploads.begin(environmentId);
        let resource: string;
        try {
          resource = readSyncRequest(await readBody(request, 64 * 1024, upload));
        } finally {
          upload.end();
        }
        const lifetimeMs = services.config.testHooks?.syncLifetimeMs ?? syncLifetimeMs;
        const sync = await services.syncs.open(environmentId, resource, lifetimeMs);
        set.status = 201;
        set.headers.location = `/${params.env}/v2/syncs/${sync.id}`;
        return syncDocument(services, environmentId, { ...sync, jobs: [], recordsMarked: 0 });
      },
      {
        parse: "none",
        params: t.Object({ env: environmentParameter }),
        detail: {
          operationId: "openSync",
          summary: "Open a sync: mirror a resource",
          tags: ["Syncs"],
          description:
            "Opens a sync of the resource: a mirror, that makes the environment's records of the resource equal to what you send. Send every record of your source in " +
            "imports that join it (POST /v2/<resource>?sync=<id>, any number, in order; they are ordinary imports), then complete it (POST /v2/syncs/{id}/complete): " +
            "the completion deletes every record of the resource that no job of the sync sent and that no other job wrote after the sync opened. " +
            "A sync not completed within 24 hours expires, and nothing is deleted.",
          requestBody: jsonBody(syncRequestSchema, { resource: "assets" }),
          responses: {
            201: jsonResponse(syncSchema, "The sync, open.", {
              Location: { schema: { type: "string", example: "/default/v2/syncs/1" }, description: "The sync's URL, from the server's root." },
            }),
            ...problemResponses({ status: 400, example: validationProblem({ resource: ["'Resource' must be the path of the resource to mirror, one of: subareas, assettypes, assetcategories, assets. You entered 'asset'."] }) }, 401, 415, 429, 503, 507),
          },
        },
      },
    )
    .get(
      "/syncs/:id",
      async ({ params, environmentId }) => {
        const view = syncIdFormat.test(params.id) ? await services.syncs.view(environmentId, Number(params.id)) : undefined;
        if (!view) throw syncNotFound();
        return syncDocument(services, environmentId, view);
      },
      {
        params: t.Object({ env: environmentParameter, id: pathParameter }),
        detail: {
          operationId: "getSync",
          summary: "Get a sync: its state, jobs and counts",
          tags: ["Syncs"],
          parameters: [syncIdParameter],
          description:
            "The sync's state (open, completed, expired), its jobs in order (the imports that joined it and its completions), how many distinct records they sent so far, " +
            "and its last completion as GET /v2/status/{id} shows it (a dry run's says what would be deleted). Kept as long as job documents once it has ended.",
          responses: {
            200: jsonResponse(syncSchema, "The sync."),
            ...problemResponses(401, { status: 404, example: syncNotFoundExample }, 429, 503),
          },
        },
      },
    )
    .post(
      "/syncs/:id/complete",
      async ({ params, query, environmentId, set }) => {
        // The request's own faults first (400), whatever the sync.
        const dryRun = readDryRun(query.dryRun);
        const limits = readLimits(query);
        const sync = await syncInPath(services, environmentId, params.id);
        refuseEnded(sync, "be completed");
        const resource = resourceByPath(sync.resource)!;
        const body = new TextEncoder().encode(JSON.stringify(limits));
        const result = await services.intake.accept({ environmentId, environment: params.env, resource, body, dryRun, operation: JobOperation.SyncCompletion, syncId: sync.id });
        if (!result.ok) throw new Error(`a sync's completion was refused at intake: ${JSON.stringify(result)}`);
        set.status = 202;
        set.headers.location = `/${params.env}/v2/status/${result.job.id}`;
        if (!isTerminal(result.job.status)) set.headers["retry-after"] = String(retryAfterSeconds(result.job));
        return jobDocument(result.job);
      },
      {
        params: t.Object({ env: environmentParameter, id: pathParameter }),
        query: t.Object({ dryRun: t.Optional(t.String()), maxDeletePercent: t.Optional(t.String()), maxDelete: t.Optional(t.String()) }),
        detail: {
          operationId: "completeSync",
          summary: "Complete a sync: delete what it did not send",
          tags: ["Syncs"],
          parameters: [
            syncIdParameter,
            {
              name: "dryRun",
              in: "query",
              required: false,
              description:
                "true: nothing is deleted, and the sync stays open; the job's output says what would be (deleted, rejected, total), as of its turn. " +
                "It counts what the sync's dry-run imports sent as sent too (a real completion does not), so that a mirror tried whole, its imports and its completion all dry runs, is exact.",
              schema: { type: "boolean", default: false },
            },
            {
              name: "maxDeletePercent",
              in: "query",
              required: false,
              description: `The most the completion may delete, as a share of the resource's records as the job finds them (default ${defaultMaxDeletePercent}). More fails the job and deletes nothing.`,
              schema: { type: "integer", minimum: 0, maximum: 100, default: defaultMaxDeletePercent },
            },
            {
              name: "maxDelete",
              in: "query",
              required: false,
              description: "Instead of maxDeletePercent: the most the completion may delete, as a count (not both).",
              schema: { type: "integer", minimum: 0 },
            },
          ],
          description:
            "Queues the sync's completion as one job, in the environment's order (imports sent before it are applied before it), and answers 202 with the job, whose operation is syncCompletion. " +
            "When it runs, it deletes every record of the sync's resource that no job of the sync sent (rejected records count as sent) and that no job outside the sync wrote after " +
            "the sync opened (an import that changed a record meanwhile keeps it), under the delete jobs' rule: a record another record refers to is rejected, not deleted, and nothing cascades; " +
            "each deleted record leaves a tombstone (GET /v2/deletions/<resource>). output.total is the number of records it considered for deletion, output.deleted those deleted, " +
            "output.rejected those still referred to. Guards, each failing the job with nothing deleted and a message saying how many would have gone and how to allow it: more to delete " +
            `than maxDeletePercent (default ${defaultMaxDeletePercent}) of the resource's records, or than maxDelete; a job of the sync that failed as a whole (canceled, its payload lost, given up ` +
            "after its runs crashed: which records it sent is unknown), each stopping one completion that is not a dry run (re-send its records, then complete again); a sync that expired before the job ran. " +
            "A completion that did not fail ends the sync (completed); a dry run, and a completion a guard stopped, leave it open, to be completed again (with a higher limit, say).",
          responses: {
            202: {
              ...jsonResponse(jobDocumentSchema, "Accepted: the completion is queued.", {
                Location: { schema: { type: "string", example: "/default/v2/status/1" }, description: "The job's status URL, from the server's root." },
                "Retry-After": { schema: { type: "integer" }, description: "Seconds to wait before the first poll of the status URL." },
              }),
              links: jobLinks,
            },
            ...problemResponses(
              { status: 400, example: validationProblem({ maxDeletePercent: ["'Max Delete Percent' must be a whole number from 0 to 100: the share of the resource's records the completion may delete. You entered '150'."] }) },
              401,
              { status: 404, example: syncNotFoundExample },
              { status: 409, description: "The sync has ended (completed or expired): open a new one.", example: syncEndedExample },
              429,
              503,
              507,
            ),
          },
        },
      },
    );
