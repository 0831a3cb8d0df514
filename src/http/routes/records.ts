import { Elysia, t } from "elysia";
import type { ResourceDefinition } from "../../resources/definition";
import { resources } from "../../resources/registry";
import { authentication } from "../auth";
import { environmentParameter, jsonResponse, problemResponses, resourceOperationIds } from "../openapi";
import { page, pageLimit, pageParameters } from "../paging";
import { notFound } from "../problem";
import { resourceSchemas } from "../schemas";
import type { Services } from "../services";

function recordRoutes(services: Services, resource: ResourceDefinition) {
  const { records } = services;
  return new Elysia()
    .use(authentication(services))
    .get(
      `/${resource.path}/:id`,
      async ({ params, environmentId }) => {
        const record = await records.get(resource, environmentId, params.id);
        if (!record) throw notFound(`No ${resource.noun} with id '${params.id.slice(0, 64)}' exists in this environment.`);
        return record;
      },
      {
        params: t.Object({ env: environmentParameter, id: t.String() }),
        detail: {
          operationId: resourceOperationIds(resource.jobType).getRecord,
          summary: `Get one ${resource.noun}`,
          tags: ["Records"],
          responses: { 200: jsonResponse(resourceSchemas(resource).stored, `The ${resource.noun}.`), ...problemResponses(401, 429, 404, 503) },
        },
      },
    )
    .get(
      `/${resource.path}`,
      async ({ query, environmentId }) => {
        const limit = pageLimit(query.limit);
        return page(await records.page(resource, environmentId, limit, query.after || undefined), limit, (record) => String(record.id));
      },
      {
        params: t.Object({ env: environmentParameter }),
        query: t.Object({ limit: t.Optional(t.String()), after: t.Optional(t.String()) }),
        detail: {
          operationId: resourceOperationIds(resource.jobType).listRecords,
          summary: `List ${resource.noun} records by id`,
          tags: ["Records"],
          parameters: [...pageParameters("The nextCursor of the previous page (an id): records after it.")],
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
