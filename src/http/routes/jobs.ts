import { Elysia, t } from "elysia";
import type { OpenAPIV3 } from "openapi-types";
import { jobDocument, jobDocumentSchema, retryAfterSeconds } from "../../jobs/document";
import { canceledOutput } from "../../jobs/outcome";
import { readDryRun } from "./imports";
import { jobPageSchema, rejectedRecordPageSchema } from "../schemas";
import { maxWaitSeconds, preferPattern, preferredWait } from "../../jobs/job-waits";
import { isTerminal, jobStatuses, type JobStatus } from "../../jobs/states";
import { jobTypes } from "../../resources/registry";
import { authentication } from "../auth";
import { environmentParameter, pathParameter, jsonResponse, problemResponses } from "../openapi";
import { page, pageLimit, pageParameters, youSent } from "../paging";
import { conflict, notFound, validationProblem } from "../problem";
import { retainedSince, type Services } from "../services";
import type { Job } from "../../store/ports";

const jobNotFound = () => notFound("No job with this id exists in this environment (job documents are kept for a limited time after they finish).");

const jobNotFinished = (status: string, retryAfter: number) =>
  conflict(`The job is still ${status}: which records it rejects is known once it has finished. Poll its statusUrl, then ask again.`, {
    "retry-after": String(retryAfter),
  });

const cannotCancel = (status: JobStatus) =>
  conflict(
    status === "Processing"
      ? "The job is Processing: it is being applied now and can no longer be canceled. Wait for it to finish; its output says what was applied."
      : `The job has already finished (${status}): there is nothing left to cancel.`,
  );

/** Job ids in paths: the integer the 202 answered (anything else names no job: 404). */
export const jobIdParameter: OpenAPIV3.ParameterObject = {
  name: "id",
  in: "path",
  required: true,
  description: "The job id, as the 202 answered it. Any other value names no job: 404.",
  schema: { type: "integer", minimum: 1, example: 1 },
};

const preferParameter: OpenAPIV3.ParameterObject = {
  name: "Prefer",
  in: "header",
  required: false,
  description:
    `\`wait=<seconds>\` (RFC 7240): hold the answer until the job is terminal or the wait is over (at most ${maxWaitSeconds} s; a larger wish, however many digits, gets ${maxWaitSeconds}), then answer as usual. ` +
    "Without it the answer is immediate. Other preferences may stand beside it (`respond-async, wait=10`); the first wait counts. " +
    "A wait that is not a whole number of seconds is not an error: it is ignored, as RFC 7240 says, and the answer is immediate.",
  schema: { type: "string", pattern: preferPattern, example: "wait=30" },
};

const recordIndex = /^(0|[1-9][0-9]{0,14})$/;
const parseIndex = (text: string) => (recordIndex.test(text) ? Number(text) : undefined);

/** Job ids are positive integers; anything else simply names no job. */
const jobId = /^[1-9][0-9]{0,14}$/;
const parseJobId = (text: string) => (jobId.test(text) ? Number(text) : undefined);

/** The environment's job named in the path, or a 404 (unknown, another environment's, or expired, alike). */
export const findJobOf = (services: Services) => async (environmentId: number, idText: string) => {
  const id = parseJobId(idText);
  const job = id === undefined ? undefined : await services.jobs.find(environmentId, id, retainedSince(services.config));
  if (!job) throw jobNotFound();
  return job;
};

export const jobRoutes = (services: Services) => {
  const findJob = findJobOf(services);
  return new Elysia()
    .use(authentication(services))
    .get(
      "/status/:id",
      async ({ params, environmentId, set, request }) => {
        const answer = (job: Job) => {
          if (!isTerminal(job.status)) set.headers["retry-after"] = String(retryAfterSeconds(job));
          return jobDocument(job);
        };
        const wait = preferredWait(request.headers.get("prefer"));
        // The common poll: one read, nothing to wait for.
        if (wait === undefined) return answer(await findJob(environmentId, params.id));
        // Held until the job ends or the wait is over. The wait is registered before each
        // read, so that an end between the read and the wait is not missed; a wake-up only says "read it again".
        const until = Date.now() + wait * 1000;
        for (;;) {
          const held = services.jobWaits.register(parseJobId(params.id) ?? 0, until - Date.now());
          const job = await findJob(environmentId, params.id).catch((error) => (held.cancel(), Promise.reject(error)));
          if (isTerminal(job.status) || Date.now() >= until || services.jobWaits.stopped) {
            held.cancel();
            // With the job only: a 404 applied no wait.
            set.headers["preference-applied"] = `wait=${wait}`;
            return answer(job);
          }
          await held.done;
        }
      },
      {
        params: t.Object({ env: environmentParameter, id: pathParameter }),
        detail: {
          operationId: "getJob",
          parameters: [jobIdParameter, preferParameter],
          summary: "Get a job's status",
          tags: ["Jobs"],
          description:
            "Poll until importJobStatus is Succeeded, PartiallySucceeded or Failed. While it is not, the answer carries Retry-After (seconds). " +
            "With `Prefer: wait=<seconds>` (long polling) the answer comes as soon as the job ends, whichever instance ran it, or when the wait is over; it carries `Preference-Applied`.",
          responses: {
            200: jsonResponse(jobDocumentSchema, "The job.", {
              "Retry-After": { schema: { type: "integer" }, description: "Seconds to wait before polling again; only while the job is not terminal." },
              "Preference-Applied": { schema: { type: "string", example: "wait=30" }, description: "The wait applied, when the request asked for one with Prefer." },
            }),
            ...problemResponses(400, 401, 429, 404, 503),
          },
        },
      },
    )
    .get(
      "/status/:id/rejected",
      async ({ params, query, environmentId }) => {
        // The request is checked before the job is looked at: a bad query is a 400 whatever the job's state (it was a
        // 409 while the job ran, then a 400), or whether the job exists.
        const limit = pageLimit(query.limit);
        const after = query.after === undefined ? undefined : parseIndex(query.after);
        if (query.after !== undefined && after === undefined) throw validationProblem({ after: [`'After' must be a record index (a whole number from 0). ${youSent(query.after)}`] });
        const job = await findJob(environmentId, params.id);
        if (!isTerminal(job.status)) throw jobNotFinished(job.status, retryAfterSeconds(job));
        const rows = await services.jobs.rejections(job.id, limit, after);
        const items = rows.map(({ position, field, message, record }) => {
          const sent = JSON.parse(record) as { id?: unknown };
          return { index: position, id: typeof sent.id === "string" ? sent.id : null, field, message, record: sent };
        });
        return page(items, limit, (item) => item.index);
      },
      {
        params: t.Object({ env: environmentParameter, id: pathParameter }),
        query: t.Object({ limit: t.Optional(t.String()), after: t.Optional(t.String()) }),
        detail: {
          operationId: "listRejectedRecords",
          summary: "List the records a finished job rejected",
          tags: ["Jobs"],
          description:
            "Every record the job did not apply, in batch order, as it was sent, with its index in the batch and why. " +
            "When nothing was applied (a batch-level failure), every record is listed. Kept as long as the job document. " +
            "Fix the records and send them again as a new batch.",
          parameters: [
            jobIdParameter,
            ...pageParameters("The nextCursor of the previous page (a record index): records after it.", recordIndex),
          ],
          responses: {
            200: jsonResponse(rejectedRecordPageSchema, "A page of rejected records."),
            ...problemResponses(400, 401, 429, 404, { status: 409, retryAfter: true }, 503),
          },
        },
      },
    )
    .post(
      "/status/:id/cancel",
      async ({ params, environmentId }) => {
        const job = await findJob(environmentId, params.id);
        const result = await services.queue.cancel(environmentId, job.id, canceledOutput(job.recordCount));
        if (!result) throw jobNotFound();
        if (result.canceled) {
          services.jobWaits.finished([job.id]);
          services.deliveries.wake();
          services.log({ msg: "job canceled", jobId: job.id, environment: params.env });
          return jobDocument(result.job);
        }
        // Asked twice: the same answer again.
        if (result.job.output?.canceled) return jobDocument(result.job);
        throw cannotCancel(result.job.status);
      },
      {
        params: t.Object({ env: environmentParameter, id: pathParameter }),
        detail: {
          operationId: "cancelJob",
          parameters: [jobIdParameter],
          summary: "Cancel a pending job",
          tags: ["Jobs"],
          description:
            "A Pending job becomes Failed at once, with nothing applied; its output says it was canceled on request (`output.canceled`: true). " +
            "Canceling it again answers the same. A job that is Processing, or has finished, cannot be canceled: 409 names its status. " +
            "A job claimed by a worker at the same moment either runs (and the cancel is refused) or is canceled (and nothing of it is applied), never both.",
          responses: {
            200: jsonResponse(jobDocumentSchema, "The canceled job."),
            ...problemResponses(400, 401, 429, 404, 409, 503, 507),
          },
        },
      },
    )
    .get(
      "/jobs",
      async ({ query, environmentId }) => {
        const limit = pageLimit(query.limit);
        const status = query.status as JobStatus | undefined;
        if (status !== undefined && !jobStatuses.includes(status)) {
          throw validationProblem({ status: [`'Status' must be one of: ${jobStatuses.join(", ")}. ${youSent(status)}`] });
        }
        const type = query.type;
        if (type !== undefined && !jobTypes.includes(type)) {
          throw validationProblem({ type: [`'Type' must be one of: ${jobTypes.join(", ")}. ${youSent(type)}`] });
        }
        const after = query.after === undefined ? undefined : parseJobId(query.after);
        if (query.after !== undefined && after === undefined) throw validationProblem({ after: [`'After' must be a job id (a positive whole number). ${youSent(query.after)}`] });
        const dryRun = query.dryRun === undefined ? undefined : readDryRun(query.dryRun);
        const rows = await services.jobs.list(environmentId, { status, type, dryRun, limit, after, retainedSince: retainedSince(services.config) });
        return page(rows.map(jobDocument), limit, (job) => job.id);
      },
      {
        params: t.Object({ env: environmentParameter }),
        query: t.Object({ status: t.Optional(t.String()), type: t.Optional(t.String()), dryRun: t.Optional(t.String()), limit: t.Optional(t.String()), after: t.Optional(t.String()) }),
        detail: {
          operationId: "listJobs",
          summary: "List jobs, newest first",
          description:
            "The environment's jobs, newest first, a page at a time, as the job documents GET /v2/status/{id} answers; finished ones are listed as long as they are kept. " +
            "Filter by status, by type and by dry run; pass a page's nextCursor as `after` for the next page.",
          tags: ["Jobs"],
          parameters: [
            { name: "status", in: "query", required: false, schema: { type: "string", enum: [...jobStatuses] }, description: "Only jobs in this state." } as OpenAPIV3.ParameterObject,
            { name: "type", in: "query", required: false, schema: { type: "string", enum: [...jobTypes] }, description: "Only jobs of this importJobType: what was imported (Asset for POST /v2/assets, and so on)." } as OpenAPIV3.ParameterObject,
            { name: "dryRun", in: "query", required: false, schema: { type: "boolean" }, description: "true: only dry runs; false: only real imports; absent: both." },
            ...pageParameters("The nextCursor of the previous page (a job id): jobs older than it.", jobId),
          ],
          responses: {
            200: jsonResponse(jobPageSchema, "A page of jobs."),
            ...problemResponses(400, 401, 429, 503),
          },
        },
      },
    );
};
