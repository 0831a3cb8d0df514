import { defaultMaxDeletePercent, JobOperation, JobStatus, type JobOutput } from "../domain/job";
import type { ResourceDefinition } from "../resources/definition";
import type { Job, RunSyncs, SyncJob } from "../store/ports";
import { deleteBatch, type DeletingRecords } from "./deletes";
import { deleteOutcome, type Rejection } from "./outcome";

// A sync's completion (DECISIONS 13's mirror): when its turn comes, it deletes every record of its resource that no job
// of the sync sent and that no other job wrote since the sync opened, under the delete jobs' reference rule, unless a
// guard stops it; then nothing is deleted, the sync stays open, and the message says how many would have gone and how
// to allow it.

/**
 * What a completion may delete, as its POST said: a share of the resource's records (`maxDeletePercent`, 0 to 100,
 * default 10) or a count (`maxDelete`), never both. Its job's body.
 */
export type CompletionLimits = { maxDeletePercent?: number; maxDelete?: number };

/** What a completion needs of its run's records: the delete jobs' (deletes.ts), and the syncs. */
export type SyncingRecords = DeletingRecords & { readonly syncs: RunSyncs };

const count = (value: number) => value.toLocaleString("en-US");
const records = (value: number, noun: string) => `${count(value)} ${value === 1 ? `${noun} record` : `${noun} records`}`;

/**
 * A job of the sync whose coverage is unknown: it ended Failed having applied nothing, and without a rejection of its
 * own records, so the run never read its ids (it was canceled before it started, its payload was lost, it was given up
 * after its runs kept crashing, or its stored batch no longer passed validation). Its records may still be the source's,
 * and deleting them would be wrong. A job whose records were all rejected one by one (a reference to nothing), or
 * refused together for a repeated id, was read: its ids were marked as sent, and its failure is not the sync's.
 */
export const failedAsAWhole = (job: SyncJob) =>
  job.operation === JobOperation.Upsert && !job.dryRun && job.status === JobStatus.Failed && job.output !== null && job.output.applied === 0 && job.output.errors.length === 0;


/** A completion stopped before deleting anything: Failed, its counts as far as it got. */
function stopped(message: string, total = 0): { status: JobStatus; output: JobOutput } {
  return { status: JobStatus.Failed, output: { message: `Nothing was deleted: ${message}`, total, applied: 0, rejected: 0, errors: [], deleted: 0 } };
}

/**
 * The percent or count the completion would need, when it deletes more than its limits allow; undefined when allowed.
 * A percent is rounded up to the next one, so that the one suggested lets the same deletion through.
 */
function overLimit(unsent: number, total: number, limits: CompletionLimits, noun: string): string | undefined {
  if (unsent === 0) return undefined;
  const share = (unsent * 100) / total;
  const suggestion = `If that is right, complete the sync again with ?maxDeletePercent=${Math.ceil(share)} (or ?maxDelete=${unsent}).`;
  const shown = `the mirror would delete ${count(unsent)} of ${records(total, noun)} (${Math.ceil(share * 10) / 10}%)`;
  if (limits.maxDelete !== undefined) return unsent > limits.maxDelete ? `${shown}, more than the ${count(limits.maxDelete)} allowed (maxDelete). ${suggestion}` : undefined;
  const allowed = limits.maxDeletePercent ?? defaultMaxDeletePercent;
  return unsent * 100 > allowed * total ? `${shown}, more than the ${allowed}% allowed. ${suggestion}` : undefined;
}

/**
 * Runs a sync's completion inside its run's transaction (a dry run's is undone by the caller). The guards first, each
 * leaving the sync open with nothing deleted: a sync gone, ended or expired; a job of the sync that failed as a whole;
 * more to delete than the limits allow. Then the deletion, by deleteBatch, so that references are checked and
 * tombstones written as for a delete job; a completion that did not fail ends the sync.
 */
export async function completeSync(
  job: Job,
  resource: ResourceDefinition,
  environment: SyncingRecords,
  limits: CompletionLimits,
): Promise<{ status: JobStatus; output: JobOutput; rejections: Rejection[] }> {
  const syncs = environment.syncs;
  const syncId = job.syncId!;
  const sync = await syncs.find(syncId);
  const done = (ending: { status: JobStatus; output: JobOutput }) => ({ ...ending, rejections: [] });
  if (!sync) return done(stopped(`sync ${syncId} no longer exists (ended and purged). Open a new sync with POST /v2/syncs and send the records again.`));
  if (sync.completedAt !== null) {
    return done(stopped(`sync ${syncId} was already completed by job ${sync.completedByJobId} at ${sync.completedAt}. To mirror again, open a new sync with POST /v2/syncs.`));
  }
  const now = new Date().toISOString();
  if (sync.expiresAt <= now) {
    if (!job.dryRun) await syncs.dropMarks(syncId);
    return done(
      stopped(
        `sync ${syncId} expired at ${sync.expiresAt}, before this completion ran (a sync must be completed within 24 hours of opening). ` +
          `Open a new sync with POST /v2/syncs and send the records again in it.`,
      ),
    );
  }
  // Each failure stops one completion (not a dry run), which tells of it; the next completion goes on, the chunk re-sent
  // as the message asks. So a failure is told once, and a completion is never stopped for ever by a job of the past.
  const failed = (await syncs.jobs(syncId, job.id)).filter((one) => one.sequence > (sync.failuresToldThrough ?? 0) && failedAsAWhole(one));
  if (failed.length > 0) {
    if (!job.dryRun) await syncs.tellFailures(syncId, failed.at(-1)!.sequence);
    const named = failed.slice(0, 5).map((failure) => `job ${failure.id} (${failure.recordCount} records: ${failure.output!.message})`);
    const more = failed.length > named.length ? ` and ${failed.length - named.length} more` : "";
    const one = failed.length === 1;
    return done(
      stopped(
        `${one ? "a job" : `${failed.length} jobs`} of sync ${syncId} failed as a whole, so which records ${one ? "it" : "they"} sent is unknown: ${named.join("; ")}${more}. ` +
          `Re-send ${one ? "its" : "their"} records in the sync (POST /v2/${resource.path}?sync=${syncId}), then complete the sync again.`,
      ),
    );
  }
  const { ids, records: total } = await syncs.unsent(resource, sync, { dryRun: job.dryRun });
  const over = overLimit(ids.length, total, limits, resource.noun);
  if (over) return done(stopped(over, ids.length));

  const { counts, rejections } = await deleteBatch(resource, job.id, environment, ids);
  const ending = deleteOutcome(resource.noun, ids.length, rejections, counts, job.dryRun);
  const { notFound: _notFound, ...output } = ending.output;
  const kept = total - ids.length;
  const ends = ending.status !== JobStatus.Failed;
  let note = ` Considered: the ${records(ids.length, resource.noun)} of ${count(total)} that no job of sync ${syncId} sent and no other job wrote since it opened (${count(kept)} kept).`;
  if (job.dryRun) note += " The sync stays open: complete it without dryRun to delete them.";
  else note += ends ? " The sync is completed." : ` The sync stays open: change or delete the records that refer to them, then complete it again.`;
  if (ends && !job.dryRun) await syncs.complete(syncId, job.id, now);
  return { status: ending.status, output: { ...output, message: output.message + note }, rejections };
}
