import { Elysia, t } from "elysia";
import { jobDocument, jobDocumentSchema } from "../../jobs/document";
import type { ResourceDefinition } from "../../resources/definition";
import { resources } from "../../resources/registry";
import { maxErrorKeys } from "../../resources/validate";
import { TaskFailed, WorkerCrashed } from "../../worker/pool";
import { authentication } from "../auth";
import { readBody, requireJson } from "../body";
import { insufficientStorage, serviceUnavailable, validationProblem } from "../problem";
import { environmentParameter, jsonBody, jsonResponse, problemResponses } from "../openapi";
import type { Services } from "../services";

/** Maps a failure to store the batch to an answer that tells the client to retry: nothing was accepted. */
function intakeFailure(error: unknown): never {
  if (error instanceof TaskFailed && error.code === "SQLITE_FULL") throw insufficientStorage();
  if (error instanceof TaskFailed || error instanceof WorkerCrashed) {
    throw serviceUnavailable("The batch could not be stored just now; nothing was accepted. Send it again.");
  }
  throw error;
}

function importRoute(services: Services, resource: ResourceDefinition) {
  return new Elysia().use(authentication(services)).post(
    `/${resource.path}`,
    async ({ request, environmentId, params, set }) => {
      requireJson(request.headers.get("content-type"));
      const body = await readBody(request, services.config.maxBodyBytes);
      // The bytes move to a worker thread (transferred, not copied): parsing and validating
      // a large body must never block this thread.
      const buffer = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength ? body.buffer : body.slice().buffer;
      const result = await services.pool
        .run("accept", { environmentId, resource: resource.path, body: buffer as ArrayBuffer }, [buffer as ArrayBuffer])
        .catch(intakeFailure);
      if (!result.ok) {
        const shown = Object.values(result.errors).reduce((sum, messages) => sum + messages.length, 0);
        const note = result.truncated
          ? `Only the first ${maxErrorKeys} fields with errors are listed (${shown} of ${result.errorCount} messages). Fix these and send again to see the rest.`
          : undefined;
        throw validationProblem(result.errors, note);
      }
      services.scheduler.kick();
      services.log({ msg: "job accepted", jobId: result.job.id, type: result.job.type, records: result.job.recordCount, environment: params.env });
      set.status = 202;
      set.headers.location = `/${params.env}/v2/status/${result.job.id}`;
      return jobDocument(result.job);
    },
    {
      parse: "none",
      params: t.Object({ env: environmentParameter }),
      detail: {
        requestBody: jsonBody(t.Array(resource.schema, { minItems: 1 }), resource.example),
        responses: { 202: jsonResponse(jobDocumentSchema, "Accepted: the job is queued."), ...problemResponses(400, 401, 429, 413, 415, 503, 507) },
        summary: `Import ${resource.noun} records`,
        tags: ["Imports"],
        description:
          `Queues a batch of ${resource.noun} records as one ${resource.jobType} job and answers 202 with the job. ` +
          `Records are upserted by id when the job runs; poll the job's statusUrl until it is terminal. ` +
          `Send at most 100 MB per request (under 8 MB is recommended).`,
      },
    },
  );
}

export const importRoutes = (services: Services) =>
  resources.reduce((app, resource) => app.use(importRoute(services, resource)), new Elysia());
