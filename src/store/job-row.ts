import type { JobOperation, JobOutput, JobStatus } from "../domain/job";
import type { ClaimedRun, Completion, Job } from "./ports";

/** A jobs row as both backends read it (camelCase keys; output as the JSON text stored). */
export type JobRow = {
  id: number;
  environmentId: number;
  type: string;
  status: string;
  recordCount: number;
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
  output: string | null;
  attempts: number;
  dryRun: boolean | number;
  operation: string;
  syncId: number | null;
};

/** A row as the domain sees it: its status typed, its output parsed. */
export function toJob(row: JobRow): Job {
  return {
    id: row.id,
    environmentId: row.environmentId,
    type: row.type,
    status: row.status as JobStatus,
    recordCount: row.recordCount,
    createdAt: row.createdAt,
    startedAt: row.startedAt,
    completedAt: row.completedAt,
    output: row.output === null ? null : (JSON.parse(row.output) as JobOutput),
    attempts: row.attempts,
    dryRun: Boolean(row.dryRun),
    operation: row.operation as JobOperation,
    syncId: row.syncId ?? null,
  };
}

/** Whether a job is still kept: unfinished, or finished at `retainedSince` or later (timestamps are ISO text). */
export const isRetained = (job: { completedAt: string | null }, retainedSince: string) => job.completedAt === null || job.completedAt >= retainedSince;

/**
 * The jobs of a run as completeRun stores them: terminal, with their output, completed now, and started then if a job
 * taken along had not started (for the webhook events written in the same transaction).
 */
export function endedJobs(run: ClaimedRun, completions: readonly Completion[], completedAt: string): Job[] {
  const claimed = new Map(run.jobs.map((job) => [job.id, job]));
  return completions.map(({ jobId, status, output }) => {
    const job = claimed.get(jobId)!;
    return { ...job, status, output, completedAt, startedAt: job.startedAt ?? completedAt };
  });
}
