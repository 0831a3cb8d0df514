import type { JobOutput } from "../jobs/outcome";
import type { JobStatus } from "../jobs/states";
import type { Job } from "./ports";

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
  };
}

/** Whether a job is still kept: unfinished, or finished at `retainedSince` or later (timestamps are ISO text). */
export const isRetained = (job: { completedAt: string | null }, retainedSince: string) => job.completedAt === null || job.completedAt >= retainedSince;
