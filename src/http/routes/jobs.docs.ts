import type { DocumentDecoration } from "elysia";
import type { OpenAPIV3 } from "openapi-types";
import { jobDocumentSchema } from "../../jobs/document";
import { maxWaitSeconds, preferPattern } from "../../jobs/job-waits";
import { jobOperations, jobStatuses } from "../../domain/job";
import { jobTypes } from "../../resources/registry";
import { jsonResponse, problemResponses } from "../openapi";
import { pageParameters } from "../paging";
import { jobPageSchema, rejectedRecordPageSchema } from "../schemas";

// The OpenAPI descriptions of the job routes (jobs.ts), kept apart from their handlers. The formats of the ids in
// paths and cursors are here too: the document states them, and the handlers read requests by them.

/** Job ids are positive integers; anything else simply names no job. */
export const jobIdFormat = /^[1-9][0-9]{0,14}$/;

/** A record's index in its batch, the cursor of the rejected records. */
export const recordIndexFormat = /^(0|[1-9][0-9]{0,14})$/;

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

export const jobDocs = {
  getJob: {
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
  listRejectedRecords: {
    operationId: "listRejectedRecords",
    summary: "List the records a finished job rejected",
    tags: ["Jobs"],
    description:
      "Every record the job did not apply, in batch order, as it was sent, with its index in the batch and why. " +
      "When nothing was applied (a batch-level failure), every record is listed. Kept as long as the job document. " +
      "Fix the records and send them again as a new batch.",
    parameters: [
      jobIdParameter,
      ...pageParameters("The nextCursor of the previous page (a record index): records after it.", recordIndexFormat),
    ],
    responses: {
      200: jsonResponse(rejectedRecordPageSchema, "A page of rejected records."),
      ...problemResponses(400, 401, 429, 404, { status: 409, retryAfter: true }, 503),
    },
  },
  cancelJob: {
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
  listJobs: {
    operationId: "listJobs",
    summary: "List jobs, newest first",
    description:
      "The environment's jobs, newest first, a page at a time, as the job documents GET /v2/status/{id} answers; finished ones are listed as long as they are kept. " +
      "Filter by status, by type, by dry run and by operation (upsert: imports; delete: delete jobs; syncCompletion: syncs' completions); pass a page's nextCursor as `after` for the next page.",
    tags: ["Jobs"],
    parameters: [
      { name: "status", in: "query", required: false, schema: { type: "string", enum: [...jobStatuses] }, description: "Only jobs in this state." } as OpenAPIV3.ParameterObject,
      { name: "type", in: "query", required: false, schema: { type: "string", enum: [...jobTypes] }, description: "Only jobs of this importJobType: what was imported (Asset for POST /v2/assets, and so on)." } as OpenAPIV3.ParameterObject,
      { name: "dryRun", in: "query", required: false, schema: { type: "boolean" }, description: "true: only dry runs; false: only real imports; absent: both." },
      { name: "operation", in: "query", required: false, schema: { type: "string", enum: [...jobOperations] }, description: "Only jobs that do this: upsert (imports), delete (delete jobs) or syncCompletion (a sync's completion, POST /v2/syncs/{id}/complete)." } as OpenAPIV3.ParameterObject,
      ...pageParameters("The nextCursor of the previous page (a job id): jobs older than it.", jobIdFormat),
    ],
    responses: {
      200: jsonResponse(jobPageSchema, "A page of jobs."),
      ...problemResponses(400, 401, 429, 503),
    },
  },
} satisfies Record<string, DocumentDecoration>;
