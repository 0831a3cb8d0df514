import type { FinishedJob } from "../jobs/apply";
import type { IntakeResult } from "../jobs/intake";

/**
 * The messages between the HTTP thread and the worker threads, in one place.
 * Every task carries a `taskId`; every reply answers exactly one task.
 */
export type TaskTypes = {
  /**
   * Parse, validate and (if valid) durably enqueue import bodies. Sent several at a time when they queue up:
   * the valid ones of a message are stored in one transaction, one fsync for all (group commit).
   */
  accept: { input: { environmentId: number; resource: string; body: ArrayBuffer; idempotencyKey?: string }; output: IntakeResult };
  /**
   * Apply the pending job `jobId` and, unless `alone`, the small jobs of its environment queued right after
   * it, in one transaction, each with its own outcome; then checkpoint the WAL. `jobs` lists what each job
   * ended as, in id order; it is empty when there was no job to claim.
   */
  apply: { input: { jobId: number; alone?: boolean }; output: { jobs: FinishedJob[] } };
  /** Mark a job Failed after its worker crashed too often (a poison job). */
  giveUp: { input: { jobId: number; message: string }; output: { jobs: FinishedJob[] } };
  /** Delete job documents completed before `before` (retention). */
  purge: { input: { before: string }; output: { count: number } };
};
export type TaskType = keyof TaskTypes;

type Grouping<K extends TaskType> = { maxTasks: number; maxBytes: number; bytes: (input: TaskTypes[K]["input"]) => number };

/**
 * Tasks a thread takes several of in one message when they are queued together: at most `maxTasks`, and no
 * more than `maxBytes` of input (the first task always goes, however big). Under load this turns many
 * commits into one; an idle pool sends each task alone, so it adds no latency.
 */
export const grouping: { [K in TaskType]?: Grouping<K> } = {
  accept: { maxTasks: 64, maxBytes: 8 * 1024 * 1024, bytes: (input) => input.body.byteLength },
};

/** Open the database; `writeLock` is shared by every thread of the pool, `owner` is this thread's number in it. */
export type Init = { type: "init"; dataDir: string; writeLock: SharedArrayBuffer; owner: number };
/** Close the thread's database connection (at shutdown, once it has no task). */
export type Close = { type: "close" };

/** One or more tasks of one type (several only for a type in `grouping`); each is answered by its own reply. */
export type TaskMessage<K extends TaskType = TaskType> = {
  type: "task";
  task: K;
  items: Array<{ taskId: number; input: TaskTypes[K]["input"] }>;
};

export type ReplyMessage =
  | { type: "ready" }
  | { type: "closed" }
  | { type: "done"; taskId: number; output: unknown }
  | { type: "error"; taskId: number; message: string; code?: string };

export type ToWorker = Init | Close | TaskMessage;
