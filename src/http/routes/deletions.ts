import { Elysia, t, type AnyElysia } from "elysia";
import { JobOperation } from "../../domain/job";
import type { ResourceDefinition } from "../../resources/definition";
import { maxIdLength } from "../../resources/validate";
import { resources } from "../../resources/registry";
import { authentication } from "../auth";
import { environmentParameter, jsonBody, jsonResponse, problemResponses, resourceOperationIds } from "../openapi";
import { pageLimit, pageParameters, youSent } from "../paging";
import { validationProblem } from "../problem";
import { idListSchema, tombstonePageSchema } from "../schemas";
import type { Services } from "../services";
import { queueRoute } from "./imports";

// Delete jobs and the tombstones they leave (DECISIONS 13). The collection stands beside /v2/status, with the resource
// after it: a record id is any string, so /v2/<resource>/deleted would shadow a record of that name.

/** A tombstone's position, the cursor of the pages. */
const positionFormat = /^(0|[1-9][0-9]{0,14})$/;

const deleteRoute = (services: Services, resource: ResourceDefinition) =>
  queueRoute(services, resource, JobOperation.Delete, `/deletions/${resource.path}`, {
    operationId: resourceOperationIds(resource.jobType).deleteRecords,
    summary: `Delete ${resource.noun} records`,
    tag: "Deletions",
    requestBody: jsonBody(idListSchema, resource.example.map((record) => (record as { id: string }).id)),
    invalid: validationProblem({ "[1]": [`'Id' must be a non-empty string of at most ${maxIdLength} characters, e.g. "A-1". You sent a number.`] }),
    description:
      `Queues the ids as one ${resource.jobType} job whose operation is delete, and answers 202 with the job; it takes its place in the environment's one order with imports ` +
      `(an import sent before it is applied before it, one sent after it after it). When it runs: a record that exists is deleted (counted in output.deleted) and leaves a tombstone ` +
      `(GET /v2/${resource.path}/{id} then answers 404 saying by which job and when; GET /v2/deletions/${resource.path} lists it); ` +
      `an id that names no record is notFound, not an error (deleting is idempotent), and so is an id's second occurrence in the batch; ` +
      `a record that another record still refers to (a sub area an asset's subAreaId names, say) is rejected, saying how many refer to it and one of them. ` +
      `Nothing cascades: delete or change the referring records first. applied = deleted + notFound; the job Succeeds when nothing was rejected. ` +
      `Importing a deleted id again creates the record again and ends its tombstone. ` +
      `With ?dryRun=true nothing is deleted: the output says what would be. `,
  });

function tombstoneRoute(services: Services, resource: ResourceDefinition) {
  return new Elysia().use(authentication(services)).get(
    `/deletions/${resource.path}`,
    async ({ query, environmentId }) => {
      const limit = pageLimit(query.limit);
      if (query.after !== undefined && !positionFormat.test(query.after)) {
        throw validationProblem({ after: [`'After' must be the nextCursor or resumeCursor of an earlier page: a whole number from 0. ${youSent(query.after)}`] });
      }
      const tombstones = await services.records.tombstones(resource, environmentId, limit, query.after === undefined ? undefined : Number(query.after));
      // nextCursor as on every other list (null on the last page, so that a client's loop ends); resumeCursor always,
      // for a reader that follows deletions over time: the next deletion comes after this page's last (or, with none,
      // after the cursor it came with).
      const items = tombstones.map(({ id, deletedAt, deletedByJobId }) => ({ id, deletedAt, deletedByJobId }));
      const end = tombstones.length > 0 ? String(tombstones.at(-1)!.position) : (query.after ?? "0");
      return { items, nextCursor: tombstones.length === limit ? end : null, resumeCursor: end };
    },
    {
      params: t.Object({ env: environmentParameter }),
      query: t.Object({ limit: t.Optional(t.String()), after: t.Optional(t.String()) }),
      detail: {
        operationId: resourceOperationIds(resource.jobType).listDeletedRecords,
        summary: `List deleted ${resource.noun} records, in the order they were deleted`,
        description:
          `The ${resource.noun} records that delete jobs deleted, a page at a time, in the order the deletions happened (not by id). Pass a page's nextCursor as \`after\` ` +
          `for the next page; the last page's nextCursor is null, as on the other lists. Every page also has a resumeCursor, the last page's too: keep the last one, ` +
          `and pass it as \`after\` later to get only the deletions since, however small their ids. A record imported again after its deletion is no longer listed. ` +
          `Deletions are kept as long as job documents (--job-retention-days): a reader away for longer may miss some, and should read the records again whole.`,
        tags: ["Deletions"],
        parameters: [...pageParameters("The nextCursor or resumeCursor of a previous page (a position in the order of deletions): deletions after it.", positionFormat)],
        responses: {
          200: jsonResponse(tombstonePageSchema, "A page of deleted records."),
          ...problemResponses(400, 401, 429, 503),
        },
      },
    },
  );
}

// Typed as any Elysia app: the routes' own types differ by resource, and nothing reads them (no typed client of routes).
export const deletionRoutes = (services: Services) =>
  resources.reduce<AnyElysia>((app, resource) => app.use(deleteRoute(services, resource)).use(tombstoneRoute(services, resource)), new Elysia());
