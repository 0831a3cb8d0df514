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
  /** Present, true, on a job canceled on request before it started. */
  canceled?: true;
};
