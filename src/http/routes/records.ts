import { Elysia, t } from "elysia";
import type { ResourceDefinition } from "../../resources/definition";
import { resources } from "../../resources/registry";
import { authentication } from "../auth";
import { environmentParameter, pathParameter, jsonResponse, problemResponses, resourceOperationIds } from "../openapi";
import { page, pageLimit, pageParameters, youSent } from "../paging";
import { deletedRecord, notFound, validationProblem } from "../problem";
import { resourceSchemas } from "../schemas";
import type { Services } from "../services";

// An id never holds the NUL character (it is refused at import): no record answers to one, and PostgreSQL could
// not even be asked.
const holdsNul = (text: string) => text.includes("\u0000");
const idCursor = /^[^\u0000]+$/;

function recordRoutes(services: Services, resource: ResourceDefinition) {
  const { records } = services;
  return new Elysia()
    .use(authentication(services))
    .get(
      `/${resource.path}/:id`,
      async ({ params, environmentId }) => {
        if (holdsNul(params.id)) throw notFound(`No ${resource.noun} with id '${params.id.slice(0, 64)}' exists in this environment.`);
        const record = await records.get(resource, environmentId, params.id);
        if (record) return record;
        // Only for a record that is not there: reading one that is costs nothing more.
        const tombstone = await records.tombstone(resource, environmentId, params.id);
        if (tombstone) throw deletedRecord(resource.noun, params.id, tombstone);
        throw notFound(`No ${resource.noun} with id '${params.id.slice(0, 64)}' exists in this environment.`);
      },
      {
        params: t.Object({ env: environmentParameter, id: pathParameter }),
        detail: {
          operationId: resourceOperationIds(resource.jobType).getRecord,
          summary: `Get one ${resource.noun}`,
          description:
            `The ${resource.noun} with this id as it is stored now, with when it was last written (updatedAt) and by which job (lastJobId). ` +
            `A record the environment does not hold is 404; one a delete job deleted (and that was not imported again since) is 404 whose detail says by which job and when, ` +
            `with the members deletedByJobId and deletedAt (kept as long as job documents).`,
          parameters: [{ name: "id", in: "path", required: true, description: `The ${resource.noun}'s id, as it was imported.`, schema: { type: "string" } }],
          tags: ["Records"],
          responses: {
            200: jsonResponse(resourceSchemas(resource).stored, `The ${resource.noun}.`),
            ...problemResponses(400, 401, 429, { status: 404, description: "No such record in this environment; or a deleted one, with deletedByJobId and deletedAt.", example: deletedRecord(resource.noun, resource.example[0]!.id as string, { deletedByJobId: 12, deletedAt: "2026-11-27T10:00:00.000Z" }) }, 503),
          },
        },
      },
    )
    .get(
      `/${resource.path}`,
      async ({ query, environmentId }) => {
        const limit = pageLimit(query.limit);
        if (query.after !== undefined && !idCursor.test(query.after)) {
          throw validationProblem({ after: [`'After' must be the nextCursor of the previous page: an id, which never holds the NUL character. ${youSent(query.after)}`] });
        }
        return page(await records.page(resource, environmentId, limit, query.after), limit, (record) => String(record.id));
      },
      {
        params: t.Object({ env: environmentParameter }),
        query: t.Object({ limit: t.Optional(t.String()), after: t.Optional(t.String()) }),
        detail: {
          operationId: resourceOperationIds(resource.jobType).listRecords,
          summary: `List ${resource.noun} records by id`,
          description:
            `Every ${resource.noun} of the environment, a page at a time, in the order of their ids. ` +
            `Pass a page's nextCursor as \`after\` for the next page; the last page's nextCursor is null.`,
          tags: ["Records"],
          parameters: [...pageParameters("The nextCursor of the previous page (an id): records after it.", idCursor)],
          responses: {
            200: jsonResponse(resourceSchemas(resource).page, "A page of records."),
            ...problemResponses(400, 401, 429, 503),
          },
        },
      },
    );
}

export const readRoutes = (services: Services) =>
  resources.reduce((app, resource) => app.use(recordRoutes(services, resource)), new Elysia());
