import type { Db } from "../db/client";
import type { ResourceDefinition } from "../resources/definition";
import type { FieldErrors } from "../resources/validate";
import { readBatch } from "./batch";
import { JobRepository, type Job } from "./repository";

export type IntakeResult =
  | { ok: true; job: Job; replayed: boolean }
  | { ok: false; errors: FieldErrors; errorCount: number; truncated: boolean }
  | { ok: false; idempotencyConflict: true };

/** Request-time work for one import POST: parse, validate, and store the job durably if the batch is well formed. */
export function acceptBatch(db: Db, environmentId: number, resource: ResourceDefinition, body: Uint8Array, idempotencyKey?: string): IntakeResult {
  const batch = readBatch(resource, body);
  if (!batch.ok) return batch;
  // The same key means the same request only for the same resource and the same bytes.
  const idempotency = idempotencyKey === undefined ? undefined : { key: idempotencyKey, requestHash: new Bun.CryptoHasher("sha256").update(`${resource.path}\n`).update(body).digest("hex") };
  // The exact bytes are stored: the apply step parses them again rather than trusting a re-serialization.
  const enqueued = new JobRepository(db).enqueue(environmentId, resource.jobType, batch.records.length, body, idempotency);
  if (enqueued.conflict) return { ok: false, idempotencyConflict: true };
  return { ok: true, job: enqueued.job, replayed: enqueued.replayed };
}
