import type { FinishedJob } from "../jobs/apply";
import type { IntakeResult } from "../jobs/intake";

/**
 * The messages between the HTTP thread and the worker threads, in one place.
 * Every task carries a `taskId`; every reply answers exactly one task.
 */
export type TaskTypes = {
  /** Parse, validate and (if valid) durably enqueue an import body. */
  accept: { input: { environmentId: number; resource: string; body: ArrayBuffer; idempotencyKey?: string }; output: IntakeResult };
  /**
   * Apply a queued job in one transaction, then checkpoint the WAL (the job is visible as finished before
   * that). `job` is undefined when there was no job to claim.
   */
  apply: { input: { jobId: number }; output: { job?: FinishedJob } };
  /** Mark a job Failed after its worker crashed too often (a poison job). */
  giveUp: { input: { jobId: number; message: string }; output: { job?: FinishedJob } };
  /** Delete job documents completed before `before` (retention). */
  purge: { input: { before: string }; output: { count: number } };
};
export type TaskType = keyof TaskTypes;

export type Init = { type: "init"; dataDir: string };
/** Close the thread's database connection (at shutdown, once it has no task). */
export type Close = { type: "close" };

export type TaskMessage<K extends TaskType = TaskType> = {
  type: "task";
  taskId: number;
  task: K;
  input: TaskTypes[K]["input"];
};

export type ReplyMessage =
  | { type: "ready" }
  | { type: "closed" }
  | { type: "done"; taskId: number; output: unknown }
  | { type: "error"; taskId: number; message: string; code?: string };

export type ToWorker = Init | Close | TaskMessage;
