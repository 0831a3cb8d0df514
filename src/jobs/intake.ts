import type { Db } from "../db/client";
import type { ResourceDefinition } from "../resources/definition";
import type { FieldErrors } from "../resources/validate";
import { readBatch } from "./batch";
import { JobRepository, type Job } from "./repository";

export type IntakeResult =
  | { ok: true; job: Job }
  | { ok: false; errors: FieldErrors; errorCount: number; truncated: boolean };

/** Request-time work for one import POST: parse, validate, and store the job durably if the batch is well formed. */
export function acceptBatch(db: Db, environmentId: number, resource: ResourceDefinition, body: Uint8Array): IntakeResult {
  const batch = readBatch(resource, body);
  if (!batch.ok) return batch;
  // The exact bytes are stored: the apply step parses them again rather than trusting a re-serialization.
  const job = new JobRepository(db).enqueue(environmentId, resource.jobType, batch.records.length, body);
  return { ok: true, job };
}
