import type { Db } from "../db/client";
import type { ResourceDefinition } from "../resources/definition";
import type { FieldErrors } from "../resources/validate";
import { readBatch, type Records } from "./batch";
import { JobRepository, type Job } from "./repository";

export type IntakeResult =
  | { ok: true; job: Job; replayed: boolean }
  | { ok: false; errors: FieldErrors; errorCount: number; truncated: boolean }
  | { ok: false; idempotencyConflict: true };

/**
 * Request-time work for one import POST: parse, validate, and store the job durably if the batch is well
 * formed. `records` is set when a new job was stored: the batch as its apply step would read it back.
 */
export function acceptBatch(db: Db, environmentId: number, resource: ResourceDefinition, body: Uint8Array, idempotencyKey?: string): { result: IntakeResult; records?: Records } {
  const batch = readBatch(resource, body);
  if (!batch.ok) return { result: batch };
  // The same key means the same request only for the same resource and the same bytes.
  const idempotency = idempotencyKey === undefined ? undefined : { key: idempotencyKey, requestHash: new Bun.CryptoHasher("sha256").update(`${resource.path}\n`).update(body).digest("hex") };
  // The exact bytes are stored, not a re-serialization: an apply step without the records handed back here
  // (another thread, a restart) parses them again.
  const enqueued = new JobRepository(db).enqueue(environmentId, resource.jobType, batch.records.length, body, idempotency);
  if (enqueued.conflict) return { result: { ok: false, idempotencyConflict: true } };
  const result: IntakeResult = { ok: true, job: enqueued.job, replayed: enqueued.replayed };
  return enqueued.replayed ? { result } : { result, records: batch.records };
}
