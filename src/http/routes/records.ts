import { Elysia, t } from "elysia";
import type { ResourceDefinition } from "../../resources/definition";
import { resources } from "../../resources/registry";
import { authentication } from "../auth";
import { environmentParameter, pathParameter, jsonResponse, problemResponses, resourceOperationIds } from "../openapi";
import { page, pageLimit, pageParameters, youSent } from "../paging";
import { notFound, validationProblem } from "../problem";
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
        const record = holdsNul(params.id) ? undefined : await records.get(resource, environmentId, params.id);
        if (!record) throw notFound(`No ${resource.noun} with id '${params.id.slice(0, 64)}' exists in this environment.`);
        return record;
      },
      {
        params: t.Object({ env: environmentParameter, id: pathParameter }),
        detail: {
          operationId: resourceOperationIds(resource.jobType).getRecord,
          summary: `Get one ${resource.noun}`,
          description:
            `The ${resource.noun} with this id as it is stored now, with when it was last written (updatedAt) and by which job (lastJobId). ` +
            `A record the environment does not hold is 404.`,
          parameters: [{ name: "id", in: "path", required: true, description: `The ${resource.noun}'s id, as it was imported.`, schema: { type: "string" } }],
          tags: ["Records"],
          responses: { 200: jsonResponse(resourceSchemas(resource).stored, `The ${resource.noun}.`), ...problemResponses(400, 401, 429, 404, 503) },
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
