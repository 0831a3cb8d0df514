import type { JobOperation } from "../domain/job";
import type { JobResult } from "../jobs/apply";
import type { IntakeResult } from "../jobs/intake";
import type { StorageFaultKind } from "../store/errors";
import type { StoreHandle } from "../store/ports";

/**
 * The messages between the HTTP thread and the worker threads, in one place.
 * Every task carries a `taskId`; every reply answers exactly one task.
 */
export type TaskTypes = {
  /**
   * Parse, validate and (if valid) durably enqueue import and delete bodies. Sent several at a time when they queue up:
   * the valid ones of a message are stored in one transaction, one fsync for all (group commit).
   */
  accept: { input: { environmentId: number; resource: string; body: ArrayBuffer; idempotencyKey?: string; dryRun?: boolean; operation?: JobOperation; syncId?: number }; output: IntakeResult };
  /**
   * Run the environment's next run (see runNext): claimed with `token`, taking over the run `takeOver` that
   * was cut short. `ran` is false when there was nothing to claim (none pending, or a run of the environment
   * in progress); `jobs` lists what each job of the run ended as, in order.
   */
  apply: { input: { environmentId: number; token: string; takeOver?: { token: string; countsAsAttempt: boolean } }; output: { ran: boolean; jobs: JobResult[] } };
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

/** Open the store the handle names. `testHooks`: see Config.testHooks; only tests set them. */
export type Init = { type: "init"; store: StoreHandle; testHooks?: ThreadTestHooks };
/** See Config.testHooks. */
export type ThreadTestHooks = { killProcessOnRecordId?: string; killProcessAfterCommitOnRecordId?: string; maxAttempts?: number };
/** Close the thread's store (at shutdown, once it has no task). */
export type Close = { type: "close" };

/** One or more tasks of one type (several only for a type in `grouping`); each is answered by its own reply. */
export type TaskMessage<K extends TaskType = TaskType> = {
  type: "task";
  task: K;
  items: Array<{ taskId: number; input: TaskTypes[K]["input"] }>;
};

/**
 * `upkeep`: sent before the answers to a message when the thread has work of its own to do after them (its store's
 * upkeep, Store.takeUpkeep); it is busy until its `idle`, and is given no task meanwhile.
 */
export type ReplyMessage =
  | { type: "ready" }
  | { type: "closed" }
  | { type: "upkeep" }
  | { type: "idle" }
  | { type: "done"; taskId: number; output: unknown }
  | { type: "error"; taskId: number; message: string; fault?: StorageFaultKind };

export type ToWorker = Init | Close | TaskMessage;
