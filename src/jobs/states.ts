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
