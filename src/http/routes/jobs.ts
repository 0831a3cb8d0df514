import { Elysia, t } from "elysia";
import { jobDocument, retryAfterSeconds } from "../../jobs/document";
import { canceledOutput } from "../../jobs/outcome";
import { readDryRun } from "./imports";
import { preferredWait } from "../../jobs/job-waits";
import { isTerminal, jobOperations, jobStatuses, type JobOperation, type JobStatus } from "../../domain/job";
import { jobTypes } from "../../resources/registry";
import { authentication } from "../auth";
import { environmentParameter, pathParameter } from "../openapi";
import { page, pageLimit, youSent } from "../paging";
import { conflict, notFound, validationProblem } from "../problem";
import { retainedSince, type Services } from "../services";
import type { Job } from "../../store/ports";
import { jobDocs, jobIdFormat, recordIndexFormat } from "./jobs.docs";

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

const parseIndex = (text: string) => (recordIndexFormat.test(text) ? Number(text) : undefined);
const parseJobId = (text: string) => (jobIdFormat.test(text) ? Number(text) : undefined);

/** The environment's job named in the path, or a 404 (unknown, another environment's, or expired, alike). */
export const findJobOf = (services: Services) => async (environmentId: number, idText: string) => {
  const id = parseJobId(idText);
  const job = id === undefined ? undefined : await services.jobs.find(environmentId, id, retainedSince(services.config));
  if (!job) throw jobNotFound();
  return job;
};

export const jobRoutes = (services: Services) => {
  const findJob = findJobOf(services);
  // A job's document as the JSON text it is sent as. While nothing is committed the store's read cache hands back the
  // same Job to every poll of it, and serializing it again was about a tenth of a status poll's CPU (docs/performance.md,
  // row 4). A Job is never changed in place: a commit makes the next read a new one.
  const documentTexts = new WeakMap<Job, string>();
  const documentText = (job: Job) => {
    let text = documentTexts.get(job);
    if (text === undefined) documentTexts.set(job, (text = JSON.stringify(jobDocument(job))));
    return text;
  };
  return new Elysia()
    .use(authentication(services))
    .get(
      "/status/:id",
      async ({ params, environmentId, set, request }) => {
        const answer = (job: Job) => {
          if (!isTerminal(job.status)) set.headers["retry-after"] = String(retryAfterSeconds(job));
          set.headers["content-type"] = "application/json;charset=utf-8";
          return documentText(job);
        };
        const wait = preferredWait(request.headers.get("prefer"));
        // The common poll: one read, nothing to wait for.
        if (wait === undefined) return answer(await findJob(environmentId, params.id));
        // Held until the job ends or the wait is over. The wait is registered before each
        // read, so that an end between the read and the wait is not missed; a wake-up only says "read it again", and
        // the polls it woke read once between them (JobWaits.read).
        const until = Date.now() + wait * 1000;
        for (;;) {
          const held = services.jobWaits.register(parseJobId(params.id) ?? 0, until - Date.now());
          const read = () => findJob(environmentId, params.id);
          const job = await services.jobWaits.read(`${environmentId}/${params.id}`, held.since, read).catch((error) => (held.cancel(), Promise.reject(error)));
          if (isTerminal(job.status) || Date.now() >= until || services.jobWaits.stopped) {
            held.cancel();
            // With the job only: a 404 applied no wait.
            set.headers["preference-applied"] = `wait=${wait}`;
            return answer(job);
          }
          await held.done;
        }
      },
      { params: t.Object({ env: environmentParameter, id: pathParameter }), detail: jobDocs.getJob },
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
        detail: jobDocs.listRejectedRecords,
      },
    )
    .post(
      "/status/:id/cancel",
      async ({ params, environmentId }) => {
        const job = await findJob(environmentId, params.id);
        const result = await services.queue.cancel(environmentId, job.id, canceledOutput(job.recordCount, job.operation));
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
      { params: t.Object({ env: environmentParameter, id: pathParameter }), detail: jobDocs.cancelJob },
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
        const operation = query.operation as JobOperation | undefined;
        if (operation !== undefined && !jobOperations.includes(operation)) {
          throw validationProblem({ operation: [`'Operation' must be one of: ${jobOperations.join(", ")}. ${youSent(operation)}`] });
        }
        const rows = await services.jobs.list(environmentId, { status, type, dryRun, operation, limit, after, retainedSince: retainedSince(services.config) });
        return page(rows.map(jobDocument), limit, (job) => job.id);
      },
      {
        params: t.Object({ env: environmentParameter }),
        query: t.Object({ status: t.Optional(t.String()), type: t.Optional(t.String()), dryRun: t.Optional(t.String()), operation: t.Optional(t.String()), limit: t.Optional(t.String()), after: t.Optional(t.String()) }),
        detail: jobDocs.listJobs,
      },
    );
};
