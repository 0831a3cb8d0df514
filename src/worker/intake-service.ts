import { JobOperation } from "../domain/job";
import type { IntakeResult } from "../jobs/intake";
import type { Log } from "../log";
import type { ResourceDefinition } from "../resources/definition";
import type { WorkerPool } from "./pool";
import type { JobScheduler } from "./scheduler";

export type IntakeRequest = {
  environmentId: number;
  /** The environment's slug, for the log. */
  environment: string;
  resource: ResourceDefinition;
  body: Uint8Array;
  idempotencyKey?: string;
  dryRun?: boolean;
  /** A delete job's body (ids) rather than an import's (records); or a sync's completion (its limits). */
  operation?: JobOperation;
  /** The sync the job joins (an import) or completes. */
  syncId?: number;
};

/**
 * A body under this size is parsed, validated and stored in well under a millisecond: its job's tasks are light
 * (they go to the worker pool's light lane, see WorkerPool).
 */
const lightBodyBytes = 64 * 1024;

/**
 * Accepting an import (or delete) batch, from the HTTP thread's side: the bytes go to a worker thread (transferred, not
 * copied) that parses, validates and stores them (jobs/intake.ts), because a large body must never block
 * this thread; a new job wakes the scheduler, with the worker slot that holds its batch parsed, and is
 * logged. A storage fault rejects as the store's named error (StorageFull, StorageUnavailable), a worker
 * that died as WorkerCrashed: either way nothing was accepted.
 */
export class IntakeService {
  constructor(private readonly deps: { pool: Pick<WorkerPool, "run">; scheduler: Pick<JobScheduler, "accepted">; log: Log }) {}

  async accept({ environmentId, environment, resource, body, idempotencyKey, dryRun, operation, syncId }: IntakeRequest): Promise<IntakeResult> {
    const buffer = (body.byteOffset === 0 && body.byteLength === body.buffer.byteLength ? body.buffer : body.slice().buffer) as ArrayBuffer;
    let acceptedOn: number | undefined;
    const light = buffer.byteLength < lightBodyBytes;
    const result = await this.deps.pool.run("accept", { environmentId, resource: resource.path, body: buffer, idempotencyKey, dryRun, operation, syncId }, [buffer], {
      light,
      onSlot: (slot) => (acceptedOn = slot),
    });
    if (result.ok && !result.replayed) {
      this.deps.scheduler.accepted(result.job.id, environmentId, acceptedOn, light);
      this.deps.log({ msg: "job accepted", jobId: result.job.id, type: result.job.type, records: result.job.recordCount, environment, ...(dryRun ? { dryRun } : {}), ...(operation !== undefined && operation !== JobOperation.Upsert ? { operation } : {}), ...(syncId !== undefined ? { syncId } : {}) });
    }
    return result;
  }
}
