/// <reference lib="webworker" />
// Entry of a worker thread. It owns its own SQLite connection; everything it does is caught and reported,
// so a task's failure never takes the thread down.
import { checkpointPassively, closeDatabase, openDatabase, type Db } from "../db/client";
import { applyJob } from "../jobs/apply";
import { acceptBatch } from "../jobs/intake";
import { batchFailure } from "../jobs/outcome";
import { JobRepository } from "../jobs/repository";
import { resourceByPath } from "../resources/registry";
import { ParsedBatches } from "./parsed-batches";
import type { ReplyMessage, TaskMessage, TaskType, TaskTypes, ToWorker } from "./protocol";

declare const self: Worker;

type Handlers = { [K in TaskType]: (db: Db, input: TaskTypes[K]["input"]) => TaskTypes[K]["output"] };

// Bodies' worth of accepted batches kept parsed until applied; the scheduler sends a job to the thread that accepted it.
const parsedBatches = new ParsedBatches(64 * 1024 * 1024);
const checkpointAfterRecords = 1_000;
const checkpointEveryMs = 1_000;
let lastCheckpoint = 0;

const handlers: Handlers = {
  accept: (db, { environmentId, resource, body, idempotencyKey }) => {
    const definition = resourceByPath(resource);
    if (!definition) throw new Error(`unknown resource ${resource}`);
    const { result, records } = acceptBatch(db, environmentId, definition, new Uint8Array(body), idempotencyKey);
    if (result.ok && records) parsedBatches.add(result.job.id, records, body.byteLength);
    return result;
  },
  apply: (db, { jobId }) => {
    const job = applyJob(db, jobId, parsedBatches.take(jobId));
    // Connections never checkpoint inside a commit (see openDatabase): the thread that applied a job does
    // it, once the job is committed and visible, so that an intake's 202 never waits for one. After a big
    // job, or at most once a second: a checkpoint syncs the database file, too much for every small job.
    if (job && (job.total >= checkpointAfterRecords || performance.now() - lastCheckpoint >= checkpointEveryMs)) {
      checkpointPassively(db);
      lastCheckpoint = performance.now();
    }
    return { job };
  },
  giveUp: (db, { jobId, message }) => {
    const jobs = new JobRepository(db);
    const job = jobs.claim(jobId);
    if (!job) return {};
    const { status, output } = batchFailure(job.recordCount, message);
    db.transaction((tx) => jobs.finish(tx as never, jobId, status, output), { behavior: "immediate" });
    return { job: { type: job.type, status, total: output.total, applied: output.applied, rejected: output.rejected } };
  },
  purge: (db, { before }) => ({ count: new JobRepository(db).purgeCompletedBefore(before) }),
};

let db: Db | undefined;
const reply = (message: ReplyMessage) => self.postMessage(message);

self.onmessage = (event: MessageEvent<ToWorker>) => {
  const message = event.data;
  if (message.type === "init") {
    db = openDatabase(message.dataDir);
    reply({ type: "ready" });
    return;
  }
  if (message.type === "close") {
    if (db) closeDatabase(db);
    db = undefined;
    reply({ type: "closed" });
    return;
  }
  const { taskId, task, input } = message as TaskMessage;
  try {
    if (!db) throw new Error("worker used before init");
    const output = (handlers[task] as (db: Db, input: unknown) => unknown)(db, input);
    reply({ type: "done", taskId, output });
  } catch (error) {
    const err = error as Error & { code?: string };
    reply({ type: "error", taskId, message: err?.message ?? String(error), code: err?.code });
  }
};
