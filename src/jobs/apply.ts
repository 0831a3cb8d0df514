import { resourceByJobType, resourceByPath } from "../resources/registry";
import type { Reference, ResourceDefinition } from "../resources/definition";
import { displayName, type BatchValidation } from "../resources/validate";
import { JobOperation, type JobOutput, type JobStatus } from "../domain/job";
import type { ClaimedRun, Completion, Job, JobQueue, Referrers, RejectedRecord, RunRecords, RunSyncs } from "../store/ports";
import { readBatch, type Records, type ValidBatch } from "./batch";
import { deleteBatch } from "./deletes";
import { completeSync, type CompletionLimits } from "./syncs";
import { batchFailure, deleteOutcome, duplicateIdsOutcome, recordOutcome, type AppliedCounts, type Rejection } from "./outcome";
import { requestBody } from "./payload";

function findDuplicateIds(records: Records): Map<string, number[]> {
  const firstIndex = new Map<string, number>();
  const duplicates = new Map<string, number[]>();
  for (let index = 0; index < records.length; index++) {
    // As validated: as stored (a lone surrogate made U+FFFD), so ids that differ only there are found here.
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
function rejectedRecords(sent: readonly unknown[], rejections: Rejection[], batchMessage?: string): RejectedRecord[] {
  const byIndex = new Map(rejections.map((rejection) => [rejection.index, rejection]));
  const indexes = batchMessage === undefined ? [...byIndex.keys()].sort((a, b) => a - b) : sent.map((_, index) => index);
  return indexes.map((index) => {
    const own = byIndex.get(index);
    // As sent, not as validated: the rejected file a client fixes and sends again keeps every field it had.
    return { position: index, field: own?.field ?? "$", message: own?.message ?? batchMessage!, record: JSON.stringify(sent[index]) };
  });
}

/** What a job ended as: for the log and the metrics. */
export type JobResult = { id: number; type: string; status: JobStatus; total: number; applied: number; rejected: number };

const resultOf = (job: Job, { status, output }: { status: JobStatus; output: JobOutput }): JobResult => ({
  id: job.id,
  type: job.type,
  status,
  total: output.total,
  applied: output.applied,
  rejected: output.rejected,
});

/**
 * A run starts at an environment's oldest pending job; a job of up to `maxRecords` records takes the small
 * jobs queued right after it along, in one commit (a burst of one-record jobs would otherwise cost two commits
 * each). A run holds at most `maxJobs` jobs and `maxRecords` records; a bigger job runs alone.
 */
export const groupLimits = { maxJobs: 20, maxRecords: 10_000 };

/**
 * Runs a job may start before it is given up as Failed (DECISIONS 5). A run is counted when claimed, so a job
 * that crashes its worker thread, or the whole process, every time is given up after this many, across
 * restarts; a run that meets a storage fault is not counted against it (see JobScheduler).
 */
export const maxAttempts = 3;

const gaveUpMessage = (attempts: number) =>
  `Nothing was applied: the job could not be processed after ${attempts} attempts (each was cut short: the worker thread, or the whole server, stopped while applying it). ` +
  "Re-send the batch; if it fails again, split it and contact the operator.";

/**
 * One environment's records as the jobs of one run see them, for reference checks: which of the ids the run's
 * batches refer to exist, looked up once when its transaction begins (a one-record job looks up its own few ids,
 * however many records the environment has), and kept up to date as the run's jobs upsert (a later job may refer
 * to records an earlier one brought, and not to those an earlier delete job took away). Nothing else writes the
 * environment's records while its run holds it.
 */
class EnvironmentRecords {
  private constructor(
    private readonly records: RunRecords,
    private present: Map<string, Set<string>>,
  ) {}

  static async lookUp(records: RunRecords, referred: Map<ResourceDefinition, Set<string>>): Promise<EnvironmentRecords> {
    const present = new Map<string, Set<string>>();
    for (const [resource, ids] of referred) present.set(resource.path, await records.existing(resource, [...ids]));
    return new EnvironmentRecords(records, present);
  }

  /** The ids of `resource` known to exist: those the run's batches refer to, and those the run upserted. */
  ids(resource: ResourceDefinition): Set<string> {
    let present = this.present.get(resource.path);
    if (!present) this.present.set(resource.path, (present = new Set()));
    return present;
  }

  /** `fn`'s writes undone afterwards (a dry run); so are the ids it added. */
  async undone<T>(fn: () => Promise<T>): Promise<T> {
    const before = new Map([...this.present].map(([path, ids]) => [path, new Set(ids)]));
    try {
      return await this.records.undone(fn);
    } finally {
      this.present = before;
    }
  }

  async upsert(resource: ResourceDefinition, jobId: number, records: Records): Promise<AppliedCounts> {
    const counts = await this.records.upsert(resource, jobId, records);
    // Only the ids of a resource that a batch of the run refers to: no later job of the run looks the others up.
    const present = this.present.get(resource.path);
    if (present) for (const record of records) present.add(record.id);
    return counts;
  }

  referrers(referring: ResourceDefinition, field: string, ids: readonly string[]): Promise<Map<string, Referrers>> {
    return this.records.referrers(referring, field, ids);
  }

  get syncs(): RunSyncs {
    return this.records.syncs;
  }

  async remove(resource: ResourceDefinition, jobId: number, ids: readonly string[]): Promise<string[]> {
    const deleted = await this.records.remove(resource, jobId, ids);
    // A later job of the run that refers to a deleted record must find it gone.
    const present = this.present.get(resource.path);
    if (present) for (const id of deleted) present.delete(id);
    return deleted;
  }
}

/**
 * What a run knows of a batch (that passed validation) before its transaction: the ids it repeats, and the ids
 * each of its references names. Read in one look at the records outside the write lock, so that applying a batch
 * whose references all exist needs no second look at its records.
 */
type BatchSurvey = { duplicates: Map<string, number[]>; referred: Map<Reference, Set<string>> };

function survey(resource: ResourceDefinition, records: Records, operation: JobOperation): BatchSurvey {
  const referred = new Map<Reference, Set<string>>();
  // A delete job's batch refers to nothing: it names records of its own resource.
  for (const reference of operation === JobOperation.Delete ? [] : resource.references) {
    const ids = new Set<string>();
    for (const record of records) if (typeof record[reference.field] === "string") ids.add(record[reference.field] as string);
    referred.set(reference, ids);
  }
  // A delete job's repeated id is not found the second time (deletes.ts): nothing to look for.
  return { duplicates: operation === JobOperation.Delete ? new Map() : findDuplicateIds(records), referred };
}

/** The ids each resource is referred to by in the run's batches, by resource. */
function referredIds(batches: StoredBatch[]): Map<ResourceDefinition, Set<string>> {
  const referred = new Map<ResourceDefinition, Set<string>>();
  for (const batch of batches) {
    if (!batch?.ok) continue;
    for (const [reference, named] of batch.referred) {
      const target = resourceByPath(reference.resource)!;
      let ids = referred.get(target);
      if (!ids) referred.set(target, (ids = new Set()));
      for (const id of named) ids.add(id);
    }
  }
  return referred;
}

/** A job's batch as its run reads it: undefined when its payload was lost; surveyed when it passed validation. */
type StoredBatch = undefined | Exclude<BatchValidation<Records[number]>, { ok: true }> | ({ ok: true } & ValidBatch & BatchSurvey);

/** The batch this thread still holds parsed (`parsed`), or else the stored payload, read and parsed again. */
async function batchOf(queue: JobQueue, job: Job, parsed: ValidBatch | undefined): Promise<StoredBatch> {
  const resource = resourceByJobType(job.type);
  let read: BatchValidation<Records[number]> | undefined = parsed && { ok: true, ...parsed };
  if (!read) {
    const stored = await queue.payload(job.id);
    read = stored && readBatch(resource, requestBody(stored), job.operation);
  }
  return read?.ok ? { ...read, ...survey(resource, read.records, job.operation) } : read;
}

/** A job's completion, and for the rejected records' rows. */
const completion = (job: Job, { status, output }: { status: JobStatus; output: JobOutput }, rejected: RejectedRecord[] = []): Completion => ({
  jobId: job.id,
  status,
  output,
  rejected,
});

/**
 * Applies one job inside its run's transaction: rejects the records whose references do not exist in the
 * environment, upserts the rest, and answers the job's completion. A delete job deletes its ids instead (deletes.ts).
 */
async function applyOne(job: Job, environment: EnvironmentRecords, batch: StoredBatch): Promise<Completion> {
  const resource = resourceByJobType(job.type);
  const outcome = (ending: ReturnType<typeof recordOutcome>, sent?: readonly unknown[], rejections: Rejection[] = []) =>
    completion(job, ending, sent ? rejectedRecords(sent, rejections, ending.output.applied === 0 ? ending.output.message : undefined) : []);
  if (!batch) return outcome(batchFailure(job.recordCount, "The job's payload was lost, so nothing was applied. Re-send the batch.", [], job.operation));
  if (!batch.ok) {
    // Cannot happen for a payload that passed request-time validation, unless the rules changed in an upgrade.
    return outcome(batchFailure(job.recordCount, `Nothing was applied: the stored batch no longer passes validation (${Object.entries(batch.errors).slice(0, 3).map(([k, v]) => `${k}: ${v.join(" ")}`).join("; ")}). Re-send it after fixing.`, [], job.operation));
  }
  if (job.operation === JobOperation.SyncCompletion) {
    const { rejections, ...ending } = await completeSync(job, resource, environment, batch.sent[0] as CompletionLimits);
    // As a delete job's: a rejected record's row is its id, as the record `{ id }`; its index, its place among the ids considered.
    return completion(job, ending, rejections.map(({ index, field, message, id }) => ({ position: index, field, message, record: JSON.stringify({ id }) })));
  }
  const { records, duplicates, referred } = batch;
  // Every record the batch sent, rejected ones too, is marked as sent (a sent record is not the mirror's to delete),
  // in this run's transaction; only a sync's jobs do this. A dry run marks after its undoing (tryOut).
  if (job.syncId !== null && job.operation === JobOperation.Upsert && !job.dryRun) await environment.syncs.mark(job.syncId, records.map((record) => record.id));
  if (job.operation === JobOperation.Delete) {
    const { counts, rejections } = await deleteBatch(resource, job.id, environment, records.map((record) => record.id));
    return outcome(deleteOutcome(resource.noun, records.length, rejections, counts, job.dryRun), batch.sent, rejections);
  }
  if (duplicates.size > 0) {
    const ending = duplicateIdsOutcome(records.length, duplicates);
    return outcome(ending, batch.sent, ending.rejections);
  }

  const checks = resource.references.map((reference) => {
    const target = resourceByPath(reference.resource)!;
    return { ...reference, target, ids: environment.ids(target), named: referred.get(reference)! };
  });
  const allExist = checks.every((check) => [...check.named].every((id) => check.ids.has(id)));
  const rejections: Rejection[] = [];
  const accepted = allExist ? records : records.filter((record, index) => {
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
  const counts = await environment.upsert(resource, job.id, accepted);
  return outcome(recordOutcome(records.length, rejections, counts, job.dryRun), batch.sent, rejections);
}

/**
 * A dry run (DECISIONS 7): applied like any job, against the data as of its turn, then undone; its outcome
 * (status, counts, errors, rejected records) is what applying would have done, and says that nothing was.
 */
async function tryOut(job: Job, environment: EnvironmentRecords, batch: StoredBatch): Promise<Completion> {
  const completion = await environment.undone(() => applyOne(job, environment, batch));
  // What a dry run of a sync sent, marked as a dry run's: a dry-run completion counts it as sent, so that a whole mirror
  // tried out (its imports and its completion, all dry runs) says exactly what it would delete.
  if (job.syncId !== null && job.operation === JobOperation.Upsert && batch?.ok) {
    await environment.syncs.mark(job.syncId, batch.records.map((record) => record.id), { dryRun: true });
  }
  // recordOutcome words a dry run's records conditionally ("would be applied"); the batch's own failures (duplicate
  // ids, a lost payload) say what applying would meet.
  const message = completion.output.message.replace(/^Nothing was (applied|deleted): /, "Applying it would fail: ");
  return { ...completion, output: { ...completion.output, message: `${dryRunNote} ${message}` } };
}

export const dryRunNote = "Dry run: nothing was applied.";

export type RunOptions = {
  /** The new run's claim token (unique). */
  token: string;
  /** This process's run of the environment that was cut short, to take its jobs over (see ClaimRequest). */
  takeOver?: { token: string; countsAsAttempt: boolean };
  /** The batch this thread still holds parsed for a job, if it does. */
  parsed?: (jobId: number) => ValidBatch | undefined;
  /** Only the first job. */
  singleJob?: boolean;
  /** Sees each batch before it is applied (a test hook). */
  inspect?: (records: Records) => void;
  /** Instead of the module's maxAttempts (a test hook). */
  maxAttempts?: number;
};

/**
 * A pending job → its terminal state: claims the environment's next run (the store decides which jobs, and
 * refuses while another run of the environment is in progress), reads and parses the batches before the write
 * transaction (so that other threads commit meanwhile), then applies them in one transaction, in order, each
 * with its own outcome, and completes the run with its claim token. A job claimed more than maxAttempts times
 * is given up as Failed instead. Resolves to what each job ended as; undefined when there was no run to claim.
 */
export async function runNext(queue: JobQueue, environmentId: number, options: RunOptions): Promise<JobResult[] | undefined> {
  const run = await queue.claimRun({ token: options.token, environmentId, takeOver: options.takeOver, alone: options.singleJob }, groupLimits);
  if (!run) return undefined;
  try {
    const first = run.jobs[0]!;
    if (first.attempts > (options.maxAttempts ?? maxAttempts)) return await giveUp(queue, run, first);
    const batches: StoredBatch[] = [];
    for (const job of run.jobs) batches.push(await batchOf(queue, job, options.parsed?.(job.id)));
    if (options.inspect) for (const batch of batches) if (batch?.ok) options.inspect(batch.records);
    const referred = referredIds(batches);
    const completions: Completion[] = [];
    await queue.completeRun(run, async (records) => {
      const environment = await EnvironmentRecords.lookUp(records, referred);
      completions.length = 0;
      for (let index = 0; index < run.jobs.length; index++) {
        const job = run.jobs[index]!;
        const apply = job.dryRun ? tryOut : applyOne;
        completions.push(await apply(job, environment, batches[index]));
      }
      return completions;
    });
    return run.jobs.map((job, index) => resultOf(job, completions[index]!));
  } finally {
    await queue.abandonRun(run);
  }
}

async function giveUp(queue: JobQueue, run: ClaimedRun, job: Job): Promise<JobResult[]> {
  const ending = batchFailure(job.recordCount, gaveUpMessage(job.attempts - 1), [], job.operation);
  await queue.completeRun(run, async () => [completion(job, ending)]);
  return [resultOf(job, ending)];
}
