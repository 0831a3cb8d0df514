import { Elysia, t } from "elysia";
import type { OpenAPIV3 } from "openapi-types";
import { jobDocument, jobDocumentSchema, retryAfterSeconds } from "../../jobs/document";
import { isTerminal, jobStatuses } from "../../jobs/states";
import { authentication } from "../auth";
import { environmentParameter, environmentPathParameter, jsonResponse, problemResponses } from "../openapi";
import { page, pageLimit, pageParameters } from "../paging";
import { notFound, validationProblem } from "../problem";
import { retainedSince, type Services } from "../services";

const jobNotFound = () => notFound("No job with this id exists in this environment (job documents are kept for a limited time after they finish).");

/** Job ids are positive integers; anything else simply names no job. */
const parseJobId = (text: string) => (/^[1-9][0-9]{0,14}$/.test(text) ? Number(text) : undefined);

export const jobRoutes = (services: Services) =>
  new Elysia()
    .use(authentication(services))
    .get(
      "/status/:id",
      ({ params, environmentId, set }) => {
        const id = parseJobId(params.id);
        const job = id === undefined ? undefined : services.jobs.find(environmentId, id, retainedSince(services.config));
        if (!job) throw jobNotFound();
        if (!isTerminal(job.status)) set.headers["retry-after"] = String(retryAfterSeconds(job));
        return jobDocument(job);
      },
      {
        params: t.Object({ env: environmentParameter, id: t.String() }),
        detail: {
          summary: "Get a job's status",
          tags: ["Jobs"],
          description: "Poll until importJobStatus is Succeeded, PartiallySucceeded or Failed. While it is not, the answer carries Retry-After (seconds).",
          responses: {
            200: jsonResponse(jobDocumentSchema, "The job.", { "Retry-After": { schema: { type: "integer" }, description: "Seconds to wait before polling again; only while the job is not terminal." } }),
            ...problemResponses(401, 429, 404),
          },
        },
      },
    )
    .get(
      "/jobs",
      ({ query, environmentId }) => {
        const limit = pageLimit(query.limit);
        const status = query.status || undefined;
        if (status !== undefined && !jobStatuses.includes(status as never)) {
          throw validationProblem({ status: [`'Status' must be one of: ${jobStatuses.join(", ")}. You entered '${status.slice(0, 40)}'.`] });
        }
        const after = query.after ? parseJobId(query.after) : undefined;
        if (query.after && after === undefined) throw validationProblem({ after: ["'After' must be a job id (a positive whole number)."] });
        const rows = services.jobs.list(environmentId, { status, limit, after, retainedSince: retainedSince(services.config) });
        return page(rows.map(jobDocument), limit, (job) => job.id);
      },
      {
        params: t.Object({ env: environmentParameter }),
        query: t.Object({ status: t.Optional(t.String()), limit: t.Optional(t.String()), after: t.Optional(t.String()) }),
        detail: {
          summary: "List jobs, newest first",
          tags: ["Jobs"],
          parameters: [
            environmentPathParameter,
            { name: "status", in: "query", required: false, schema: { type: "string", enum: [...jobStatuses] }, description: "Only jobs in this state." } as OpenAPIV3.ParameterObject,
            ...pageParameters("The nextCursor of the previous page (a job id): jobs older than it."),
          ],
          responses: {
            200: jsonResponse(t.Object({ items: t.Array(jobDocumentSchema), nextCursor: t.Union([t.String(), t.Null()]) }), "A page of jobs."),
            ...problemResponses(400, 401, 429),
          },
        },
      },
    );
