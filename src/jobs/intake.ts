import { JobOperation } from "../domain/job";
import type { ResourceDefinition } from "../resources/definition";
import type { FieldErrors } from "../resources/validate";
import { readBatch, type ValidBatch } from "./batch";
import { storedPayload } from "./payload";
import type { EnqueueRequest, Job, JobQueue } from "../store/ports";

export type IntakeResult =
  | { ok: true; job: Job; replayed: boolean }
  | { ok: false; errors: FieldErrors; errorCount: number; truncated: boolean }
  | { ok: false; idempotencyConflict: true };

/**
 * `operation`: an import's upsert (the default), a delete job's (its body a list of ids), or a sync's completion (its
 * body the completion's limits). `syncId`: the sync an import joins, or that the completion completes.
 */
export type IntakeRequest = { environmentId: number; resource: ResourceDefinition; body: Uint8Array; idempotencyKey?: string; dryRun?: boolean; operation?: JobOperation; syncId?: number };

/** What one import or delete POST came to; `batch` is set when a new job was stored: the batch as its apply step would read it back. */
export type Accepted = { result: IntakeResult; batch?: ValidBatch };

/**
 * Request-time work for import and delete POSTs, on a worker thread: parse and validate each body, then store the well-formed ones as jobs,
 * all in one transaction (requests that arrive together share one commit). Answers in the order asked;
 * one request's invalid body never affects another's.
 */
export async function acceptBatches(queue: JobQueue, requests: IntakeRequest[]): Promise<Accepted[]> {
  const answers: Accepted[] = new Array(requests.length);
  const stored: Array<{ index: number; batch: ValidBatch; request: Omit<EnqueueRequest, "body">; payload: Promise<Uint8Array> }> = [];
  requests.forEach(({ environmentId, resource, body, idempotencyKey, dryRun = false, operation = JobOperation.Upsert, syncId }, index) => {
    // Compressing a big body takes about half as long as parsing and validating it (docs/performance.md, row 3):
    // started first, it runs on another core meanwhile. An invalid body's compression is wasted (a big invalid
    // body costs its compression too) and thrown away unawaited, so its failure, if any, must not surface as an
    // unhandled rejection (which ends a worker thread).
    const payload = storedPayload(body);
    payload.catch(() => {});
    const batch = readBatch(resource, body, operation);
    if (!batch.ok) return void (answers[index] = { result: batch });
    // The same key means the same request only for the same path (an import's or a deletion's of the resource), the
    // same bytes and the same dry-run flag (a real run is not the replay of a dry run). An import's hash is as it
    // always was.
    // An import that joins a sync is another request than the same import outside it (or in another sync).
    const path = operation === JobOperation.Delete ? `deletions/${resource.path}` : operation === JobOperation.SyncCompletion ? `syncs/${syncId}/complete` : resource.path;
    const query = [dryRun ? "dryRun=true" : "", syncId !== undefined && operation === JobOperation.Upsert ? `sync=${syncId}` : ""].filter(Boolean).join("&");
    const target = query ? `${path}?${query}` : path;
    const idempotency = idempotencyKey === undefined ? undefined : { key: idempotencyKey, requestHash: new Bun.CryptoHasher("sha256").update(`${target}\n`).update(body).digest("hex") };
    // The exact bytes are stored (compressed when big), not a re-serialization: an apply step without the
    // records handed back here (another thread, a restart) parses them again.
    stored.push({ index, batch: { records: batch.records, sent: batch.sent }, request: { environmentId, type: resource.jobType, recordCount: batch.records.length, idempotency, dryRun, operation, syncId }, payload });
  });
  if (stored.length === 0) return answers;
  const bodies = await Promise.all(stored.map(({ payload }) => payload));
  const enqueued = await queue.enqueue(stored.map(({ request }, n) => ({ ...request, body: bodies[n]! })));
  stored.forEach(({ index, batch }, n) => {
    const outcome = enqueued[n]!;
    if (outcome.conflict) answers[index] = { result: { ok: false, idempotencyConflict: true } };
    else if (outcome.replayed) answers[index] = { result: { ok: true, job: outcome.job, replayed: true } };
    else answers[index] = { result: { ok: true, job: outcome.job, replayed: false }, batch };
  });
  return answers;
}

/** One import POST: see acceptBatches. */
export const acceptBatch = async (queue: JobQueue, environmentId: number, resource: ResourceDefinition, body: Uint8Array, idempotencyKey?: string): Promise<Accepted> =>
  (await acceptBatches(queue, [{ environmentId, resource, body, idempotencyKey }]))[0]!;
