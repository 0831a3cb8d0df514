import { writeTransaction, type Db } from "../db/client";
import type { ResourceDefinition } from "../resources/definition";
import { resourceByJobType, resourceByPath } from "../resources/registry";
import { RecordStore } from "../resources/store";
import { displayName, type BatchValidation } from "../resources/validate";
import { readBatch, type Records } from "./batch";
import { requestBody } from "./payload";
import { batchFailure, duplicateIdsOutcome, recordOutcome, type JobOutput, type Rejection } from "./outcome";
import type { Job, JobRepository, RejectedRecord } from "./repository";
import type { JobStatus } from "./states";

function findDuplicateIds(records: Records): Map<string, number[]> {
  const firstIndex = new Map<string, number>();
  const duplicates = new Map<string, number[]>();
  for (let index = 0; index < records.length; index++) {
    const id = records[index]!.id;
    const first = firstIndex.get(id);
    if (first === undefined) firstIndex.set(id, index);
    else {
      const indexes = duplicates.get(id);
      if (indexes) indexes.push(index);
      else duplicates.set(id, [first, index]);
    }
  }
  return duplicates;
}

/**
 * The rows of the rejected records: those with a reason of their own, or, when nothing was applied
 * (`batchMessage`), every record, those without a reason of their own carrying the batch's.
 */
function rejectedRecords(records: Records, rejections: Rejection[], batchMessage?: string): RejectedRecord[] {
  const byIndex = new Map(rejections.map((rejection) => [rejection.index, rejection]));
  const indexes = batchMessage === undefined ? [...byIndex.keys()].sort((a, b) => a - b) : records.map((_, index) => index);
  return indexes.map((index) => {
    const own = byIndex.get(index);
    return { position: index, field: own?.field ?? "$", message: own?.message ?? batchMessage!, record: JSON.stringify(records[index]) };
  });
}

/** What a finished job ended as: for the log and the metrics. */
export type FinishedJob = { id: number; type: string; status: JobStatus; total: number; applied: number; rejected: number };

/** What `job` ended as, given the terminal state and output stored for it. */
export const finishedJob = (job: Job, status: JobStatus, output: JobOutput): FinishedJob => ({
  id: job.id,
  type: job.type,
  status,
  total: output.total,
  applied: output.applied,
  rejected: output.rejected,
});

/**
 * A job of up to `maxRecords` records is applied together with the small jobs queued right after it in its
 * environment, in one commit (a burst of one-record jobs would otherwise cost two commits each). A group
 * holds at most `maxJobs` jobs and `maxRecords` records; a bigger job is applied alone.
 */
export const groupLimits = { maxJobs: 20, maxRecords: 10_000 };

/**
 * One environment's records as the jobs of one transaction see them: a store per resource (its upsert
 * prepared once), and the ids that references are checked against, read once and kept up to date as the
 * transaction's jobs upsert (a later job may refer to records an earlier one brought).
 */
class EnvironmentRecords {
  private readonly stores = new Map<string, RecordStore>();
  private readonly idSets = new Map<string, Set<string>>();

  constructor(
    private readonly db: Db,
    readonly environmentId: number,
  ) {}

  store(resource: ResourceDefinition): RecordStore {
    let store = this.stores.get(resource.path);
    if (!store) this.stores.set(resource.path, (store = new RecordStore(this.db, resource)));
    return store;
  }

  ids(resource: ResourceDefinition): Set<string> {
    let ids = this.idSets.get(resource.path);
    if (!ids) this.idSets.set(resource.path, (ids = this.store(resource).idSet(this.environmentId)));
    return ids;
  }

  upsert(resource: ResourceDefinition, jobId: number, records: Records): void {
    this.store(resource).upsertAll(this.environmentId, jobId, records);
    const ids = this.idSets.get(resource.path);
    if (ids) for (const record of records) ids.add(record.id);
  }
}

/** A job's batch as its apply step reads it: undefined when its payload was lost. */
type StoredBatch = BatchValidation<Records[number]> | undefined;

/** The batch this thread still holds parsed (`parsed`), or else the stored payload, read and parsed again. */
function readJob(jobsRepo: JobRepository, job: Job, parsed: Records | undefined): StoredBatch {
  if (parsed) return { ok: true, records: parsed };
  const stored = jobsRepo.payload(job.id);
  return stored ? readBatch(resourceByJobType(job.type), requestBody(stored)) : undefined;
}

/**
 * Applies one job inside the caller's transaction: reject records whose references do not exist in the
 * environment, upsert the rest, store the outcome, drop the payload.
 */
function applyOne(jobsRepo: JobRepository, job: Job, environment: EnvironmentRecords, batch: StoredBatch): FinishedJob {
  const resource = resourceByJobType(job.type);
  const finish = ({ status, output }: ReturnType<typeof recordOutcome>, records?: Records, rejections: Rejection[] = []): FinishedJob => {
    jobsRepo.finish(job.id, status, output, records ? rejectedRecords(records, rejections, output.applied === 0 ? output.message : undefined) : []);
    return finishedJob(job, status, output);
  };
  if (!batch) return finish(batchFailure(job.recordCount, "The job's payload was lost, so nothing was applied. Re-send the batch."));
  if (!batch.ok) {
    // Cannot happen for a payload that passed request-time validation, unless the rules changed in an upgrade.
    return finish(batchFailure(job.recordCount, `Nothing was applied: the stored batch no longer passes validation (${Object.entries(batch.errors).slice(0, 3).map(([k, v]) => `${k}: ${v.join(" ")}`).join("; ")}). Re-send it after fixing.`));
  }
  const records = batch.records as Records;
  const duplicates = findDuplicateIds(records);
  if (duplicates.size > 0) {
    const outcome = duplicateIdsOutcome(records.length, duplicates);
    return finish(outcome, records, outcome.rejections);
  }

  const checks = resource.references.map((reference) => {
    const target = resourceByPath(reference.resource)!;
    return { ...reference, target, ids: environment.ids(target) };
  });
  const rejections: Rejection[] = [];
  const accepted = checks.length === 0 ? records : records.filter((record, index) => {
    for (const check of checks) {
      const value = record[check.field] as string;
      if (!check.ids.has(value)) {
        const label = `'${displayName(check.field)}'`;
        rejections.push({
          index,
          id: record.id,
          field: check.field,
          reason: `Unknown ${check.field} (no such ${check.target.noun} in this environment)`,
          message: `${label} '${value}' does not exist in this environment. Import it first with POST /v2/${check.target.path}, or correct the ${check.field}.`,
        });
        return false;
      }
    }
    return true;
  });
  environment.upsert(resource, job.id, accepted);
  return finish(recordOutcome(records.length, rejections), records, rejections);
}

/**
 * Applies the pending job `jobId` and, unless `alone` or the job is big, the small pending jobs queued
 * right after it in its environment (see groupLimits): in one transaction, in id order, each with its own
 * outcome. A big job, or one `alone`, is claimed first in a commit of its own, so that pollers see it
 * Processing while it runs; a group goes from Pending to its outcomes in its one commit.
 * Returns what each job ended as, in id order; empty when the job was not there to apply.
 * `parsed(id)` gives a batch this thread still holds parsed, if it does.
 */
export function applyJobs(db: Db, jobsRepo: JobRepository, jobId: number, options: { parsed?: (jobId: number) => Records | undefined; alone?: boolean } = {}): FinishedJob[] {
  const first = jobsRepo.unfinished(jobId);
  if (!first) return [];
  const alone = options.alone || first.recordCount > groupLimits.maxRecords;
  if (alone && !jobsRepo.claim(jobId)) return [];
  const group = [first];
  if (!alone) {
    let records = first.recordCount;
    for (const job of jobsRepo.pendingAfter(first, groupLimits.maxJobs - 1)) {
      records += job.recordCount;
      if (records > groupLimits.maxRecords) break;
      group.push(job);
    }
  }
  // Read and parsed before the write lock is taken, so that other threads can commit meanwhile: nothing but
  // this run changes these jobs (their environment runs one at a time), and a payload never changes.
  const batches = group.map((job) => readJob(jobsRepo, job, options.parsed?.(job.id)));
  // On `db` inside the transaction: a Drizzle transaction is the same connection, and RecordStore prepares
  // its upsert on the connection itself.
  return writeTransaction(db, () => {
    const environment = new EnvironmentRecords(db, first.environmentId);
    return group.map((job, index) => applyOne(jobsRepo, job, environment, batches[index]));
  });
}
