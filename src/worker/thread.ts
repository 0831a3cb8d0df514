/// <reference lib="webworker" />
// Entry of a worker thread. It owns its own SQLite connection; everything it does is caught and reported,
// so a task's failure never takes the thread down. A message's tasks fail together when its handler throws
// (for grouped intakes: their one transaction was not committed, so none of them was stored).
import { checkpointPassively, closeDatabase, openDatabase, writeTransaction, type Db } from "../db/client";
import { WriteLock } from "../db/write-lock";
import { applyJobs, finishedJob } from "../jobs/apply";
import { acceptBatches } from "../jobs/intake";
import { batchFailure } from "../jobs/outcome";
import { JobRepository } from "../jobs/repository";
import { resourceByPath } from "../resources/registry";
import { ParsedBatches } from "./parsed-batches";
import type { ReplyMessage, TaskMessage, TaskType, TaskTypes, ToWorker } from "./protocol";

declare const self: Worker;

// The thread's connection, and its job statements prepared once.
type Connection = { db: Db; jobs: JobRepository };
// A handler takes every task of one message (one, unless its type is grouped) and answers each, in order.
type Handlers = { [K in TaskType]: (connection: Connection, inputs: Array<TaskTypes[K]["input"]>) => Array<TaskTypes[K]["output"]> };
const oneByOne =
  <I, O>(handler: (connection: Connection, input: I) => O) =>
  (connection: Connection, inputs: I[]): O[] =>
    inputs.map((input) => handler(connection, input));

// Bodies' worth of accepted batches kept parsed until applied; the scheduler sends a job to the thread that accepted it.
const parsedBatches = new ParsedBatches(64 * 1024 * 1024);
const checkpointAfterRecords = 1_000;
const checkpointEveryMs = 1_000;
let lastCheckpoint = 0;

const handlers: Handlers = {
  accept: ({ jobs }, inputs) => {
    const requests = inputs.map(({ environmentId, resource, body, idempotencyKey }) => {
      const definition = resourceByPath(resource);
      if (!definition) throw new Error(`unknown resource ${resource}`);
      return { environmentId, resource: definition, body: new Uint8Array(body), idempotencyKey };
    });
    return acceptBatches(jobs, requests).map(({ result, records }, index) => {
      if (result.ok && records) parsedBatches.add(result.job.id, records, inputs[index]!.body.byteLength);
      return result;
    });
  },
  apply: oneByOne(({ db, jobs: repository }, { jobId, alone }) => {
    const jobs = applyJobs(db, repository, jobId, { parsed: (id) => parsedBatches.take(id), alone });
    // Connections never checkpoint inside a commit (see openDatabase): the thread that applied jobs does
    // it, once they are committed and visible, so that an intake's 202 never waits for one. After big
    // jobs, or at most once a second: a checkpoint syncs the database file, too much for every small job.
    const records = jobs.reduce((sum, job) => sum + job.total, 0);
    if (jobs.length > 0 && (records >= checkpointAfterRecords || performance.now() - lastCheckpoint >= checkpointEveryMs)) {
      checkpointPassively(db);
      lastCheckpoint = performance.now();
    }
    return { jobs };
  }),
  giveUp: oneByOne(({ db, jobs }, { jobId, message }) => {
    const job = jobs.claim(jobId);
    if (!job) return { jobs: [] };
    const { status, output } = batchFailure(job.recordCount, message);
    writeTransaction(db, () => jobs.finish(jobId, status, output));
    return { jobs: [finishedJob(job, status, output)] };
  }),
  purge: oneByOne(({ jobs }, { before }) => ({ count: jobs.purgeCompletedBefore(before) })),
};

let connection: Connection | undefined;
const reply = (message: ReplyMessage) => self.postMessage(message);

self.onmessage = (event: MessageEvent<ToWorker>) => {
  const message = event.data;
  if (message.type === "init") {
    const db = openDatabase(message.dataDir, { writeLock: new WriteLock(message.writeLock, message.owner) });
    connection = { db, jobs: new JobRepository(db) };
    reply({ type: "ready" });
    return;
  }
  if (message.type === "close") {
    if (connection) closeDatabase(connection.db);
    connection = undefined;
    reply({ type: "closed" });
    return;
  }
  const { task, items } = message as TaskMessage;
  try {
    if (!connection) throw new Error("worker used before init");
    const outputs = (handlers[task] as (connection: Connection, inputs: unknown[]) => unknown[])(connection, items.map((item) => item.input));
    items.forEach(({ taskId }, index) => reply({ type: "done", taskId, output: outputs[index] }));
  } catch (error) {
    const err = error as Error & { code?: string };
    for (const { taskId } of items) reply({ type: "error", taskId, message: err?.message ?? String(error), code: err?.code });
  }
};
