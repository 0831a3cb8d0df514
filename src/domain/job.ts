// What everyone says about a job: its states and what a finished one reports. At the bottom of the import graph
// (domain/ imports nothing of importd's, see .dependency-cruiser.cjs), so that the store, the job rules, the
// webhooks, the HTTP API, the CLI and the browser console share them without importing one another.

export const JobStatus = {
  Pending: "Pending",
  Processing: "Processing",
  Succeeded: "Succeeded",
  PartiallySucceeded: "PartiallySucceeded",
  Failed: "Failed",
} as const;
export type JobStatus = (typeof JobStatus)[keyof typeof JobStatus];

export const jobStatuses = Object.values(JobStatus);
export const terminalStatuses: ReadonlySet<string> = new Set([
  JobStatus.Succeeded,
  JobStatus.PartiallySucceeded,
  JobStatus.Failed,
]);
export const isTerminal = (status: string) => terminalStatuses.has(status);

/**
 * What a job does to its resource's records (DECISIONS 13): an import upserts them, a delete job deletes them by id,
 * and a sync's completion (a mirror's end) deletes those that no job of its sync sent. Its own field of the job
 * document, apart from importJobType (which names the resource).
 */
export const JobOperation = {
  Upsert: "upsert",
  Delete: "delete",
  SyncCompletion: "syncCompletion",
} as const;
export type JobOperation = (typeof JobOperation)[keyof typeof JobOperation];
export const jobOperations = Object.values(JobOperation);

/** What each operation does, for people (the CLI's jobs show and --help, the console's job page). */
export const operationMeanings: Record<JobOperation, string> = {
  [JobOperation.Upsert]: "an import",
  [JobOperation.Delete]: "a delete job, which deletes the records of the ids it was sent",
  [JobOperation.SyncCompletion]: "a mirror's completion, which deletes the records its sync's imports did not send",
};

/**
 * What a finished job reports (worded by jobs/outcome.ts). `message` is for people: how many failed, which (index
 * and id) and why, grouped by reason, bounded in length. `errors` is for programs, capped at jobs/outcome.ts's `maxOutputErrors`.
 */
export type JobOutput = {
  message: string;
  total: number;
  applied: number;
  rejected: number;
  errors: Array<{ index: number; id: string; field: string; message: string }>;
  /**
   * What applying did: applied = created + updated + unchanged (an unchanged record equals the stored one and is
   * not written). Absent only from jobs finished by an importd from before they were counted.
   */
  created?: number;
  updated?: number;
  unchanged?: number;
  /**
   * A delete job's: records deleted, and ids that named no record (applied = deleted + notFound). A sync's completion
   * has deleted (or would have, a dry run) of the `total` records it considered; its `rejected` are those still
   * referred to.
   */
  deleted?: number;
  notFound?: number;
  /** Present, true, on a job canceled on request before it started. */
  canceled?: true;
};

/**
 * A sync (DECISIONS 13's mirror): open while imports join it, completed once a completion ran past its guards, expired
 * when not completed within its 24 hours. Derived from its row and the time, never stored as such.
 */
export const SyncState = {
  Open: "open",
  Completed: "completed",
  Expired: "expired",
} as const;
export type SyncState = (typeof SyncState)[keyof typeof SyncState];
export const syncStates = Object.values(SyncState);

/** How long a sync stays open for its imports and its completion. */
export const syncLifetimeMs = 24 * 60 * 60 * 1000;
/** The share of the resource's records a completion may delete unless it allows more (rsync's --max-delete, in percent). */
export const defaultMaxDeletePercent = 10;
