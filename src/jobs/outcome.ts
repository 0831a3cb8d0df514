import { JobOperation, JobStatus, type JobOutput } from "../domain/job";

/**
 * What a finished job reports (its shape: JobOutput, in domain/job.ts). `message` is for people: how many failed,
 * which (index and id) and why, grouped by reason, bounded in length. `errors` is for programs, capped at
 * `maxOutputErrors`.
 */

/** One rejected record. `reason` groups records in the message; `message` is this record's own text. */
export type Rejection = { index: number; id: string; field: string; reason: string; message: string };

/** What applying did to the applied records. */
export type AppliedCounts = { created: number; updated: number; unchanged: number };
const noneApplied: AppliedCounts = { created: 0, updated: 0, unchanged: 0 };
const noneDeleted: DeletedCounts = { deleted: 0, notFound: 0 };

const split = ({ created, updated, unchanged }: AppliedCounts) => `${created} created, ${updated} updated, ${unchanged} unchanged`;

export const maxOutputErrors = 1000;
const maxGroups = 5;
const maxExamplesPerGroup = 10;

const plural = (count: number, one: string, many = `${one}s`) => `${count} ${count === 1 ? one : many}`;

function describeGroups(rejections: Rejection[]): string {
  const groups = new Map<string, Rejection[]>();
  for (const rejection of rejections) {
    const group = groups.get(rejection.reason);
    if (group) group.push(rejection);
    else groups.set(rejection.reason, [rejection]);
  }
  const parts: string[] = [];
  for (const [reason, members] of [...groups].slice(0, maxGroups)) {
    const shown = members.slice(0, maxExamplesPerGroup).map((r) => `[${r.index}] '${r.id}'`);
    const more = members.length > shown.length ? ` and ${members.length - shown.length} more` : "";
    parts.push(`${reason}: ${plural(members.length, "record")}, ${shown.join(", ")}${more}.`);
  }
  if (groups.size > maxGroups) parts.push(`${plural(groups.size - maxGroups, "other reason")} not shown here; see errors.`);
  return parts.join(" ");
}

function errorsOf(rejections: Rejection[]) {
  return rejections
    .slice(0, maxOutputErrors)
    .map(({ index, id, field, message }) => ({ index, id, field, message }));
}

function capNote(count: number) {
  return count > maxOutputErrors ? ` errors lists the first ${maxOutputErrors} of ${count}.` : "";
}

/**
 * The outcome of a job whose records were checked one by one; `counts`: what applying the others did. A dry run's
 * is worded for what it is: nothing was kept, the rest would be.
 */
export function recordOutcome(total: number, rejections: Rejection[], counts: AppliedCounts, dryRun = false): { status: JobStatus; output: JobOutput } {
  const rejected = rejections.length;
  const applied = total - rejected;
  const base = { total, applied, rejected, errors: errorsOf(rejections), ...counts };
  // A dry run's words are conditional: it follows "Dry run: nothing was applied." (tryOut), which a past tense contradicts.
  const were = dryRun ? "would be" : total === 1 ? "was" : "were";
  if (rejected === 0) {
    const message = total === 1 ? `The record ${were} applied (${split(counts)}).` : `All ${total} records ${were} applied (${split(counts)}).`;
    return { status: JobStatus.Succeeded, output: { message, ...base } };
  }
  const details = describeGroups(rejections);
  if (applied === 0) {
    return {
      status: JobStatus.Failed,
      output: {
        message: `${total === 1 ? "The record" : `All ${total} records`} ${were} rejected${dryRun ? "" : "; nothing was applied"}. ${details} Fix these records and re-send them.${capNote(rejected)}`,
        ...base,
      },
    };
  }
  return {
    status: JobStatus.PartiallySucceeded,
    output: {
      message:
        `${rejected} of ${total} records ${dryRun ? "would be" : "were"} rejected and ${applied} applied (${split(counts)}). ${details} ` +
        (dryRun ? "Fix the rejected records before you send the batch for real." : "Fix and re-send only the rejected records; the applied ones are kept.") +
        capNote(rejected),
      ...base,
    },
  };
}

/** A job canceled on request while it was still Pending (DECISIONS 7): Failed, nothing applied. */
export function canceledOutput(total: number, operation: JobOperation = JobOperation.Upsert): JobOutput {
  if (operation === JobOperation.SyncCompletion) {
    return {
      message: "Canceled on request before it started: nothing was deleted, and the sync stays open. Complete it again when you mean to.",
      total,
      applied: 0,
      rejected: 0,
      errors: [],
      deleted: 0,
      canceled: true,
    };
  }
  if (operation === JobOperation.Delete) {
    return {
      message: `Canceled on request before it started: nothing was deleted (${plural(total, "id")} not looked at). Send them again to delete them.`,
      total,
      applied: 0,
      rejected: 0,
      errors: [],
      deleted: 0,
      notFound: 0,
      canceled: true,
    };
  }
  return {
    message: `Canceled on request before it started: nothing was applied (${plural(total, "record")} not imported). Send the batch again to import it.`,
    total,
    applied: 0,
    rejected: 0,
    errors: [],
    ...noneApplied,
    canceled: true,
  };
}

/**
 * The outcome of a job that violated a batch-level constraint, or was given up or lost its payload: nothing applied.
 * Its counts are its operation's (a delete job's deleted and notFound, never created/updated/unchanged), so that
 * every reader of a delete job's output finds the same fields whatever it ended as.
 */
export function batchFailure(total: number, message: string, rejections: Rejection[] = [], operation: JobOperation = JobOperation.Upsert): { status: JobStatus; output: JobOutput } {
  const counts = operation === JobOperation.Delete ? noneDeleted : noneApplied;
  return {
    status: JobStatus.Failed,
    output: { message, total, applied: 0, rejected: total, errors: errorsOf(rejections), ...counts },
  };
}

/** Duplicate ids fail the whole batch; the message names the ids and where they stand. */
export function duplicateIdsOutcome(total: number, duplicates: Map<string, number[]>) {
  const rejections: Rejection[] = [];
  const named: string[] = [];
  for (const [id, indexes] of duplicates) {
    if (named.length < maxExamplesPerGroup) named.push(`'${id}' at ${indexes.map((i) => `[${i}]`).join(", ")}`);
    for (const index of indexes) {
      rejections.push({ index, id, field: "id", reason: "duplicate id", message: `'Id' '${id}' appears more than once in this batch (at ${indexes.map((i) => `[${i}]`).join(", ")}).` });
    }
  }
  const more = duplicates.size > named.length ? ` and ${duplicates.size - named.length} more` : "";
  const message =
    `Nothing was applied: the batch contains ${plural(duplicates.size, "id")} more than once: ${named.join("; ")}${more}. ` +
    `Each id may appear only once per batch; remove the duplicates and re-send the batch.${capNote(rejections.length)}`;
  return { ...batchFailure(total, message, rejections), rejections };
}

/** What a delete job did to its ids: deleted, or naming no record (repeats in the batch included). */
export type DeletedCounts = { deleted: number; notFound: number };
const maxRejectionsTold = 3;

/**
 * The outcome of a delete job (DECISIONS 13), as recordOutcome's for an import: Succeeded when nothing was rejected
 * (an id that named no record is not an error: deleting is idempotent), Failed when everything was, otherwise
 * PartiallySucceeded; applied = deleted + notFound. `noun`: what one record is called ("sub area").
 */
export function deleteOutcome(noun: string, total: number, rejections: Rejection[], { deleted, notFound }: DeletedCounts, dryRun = false): { status: JobStatus; output: JobOutput } {
  const rejected = rejections.length;
  const was = (count: number) => (count === 1 ? "was" : "were");
  const parts = [`${dryRun ? "Would delete" : "Deleted"} ${deleted} of ${plural(total, `${noun} record`)}`];
  if (notFound > 0) parts.push(`${notFound} ${was(notFound)} not found (never imported, or already deleted)`);
  let message = parts.join("; ");
  if (rejected > 0) {
    const told = rejections.slice(0, maxRejectionsTold).map((rejection) => `[${rejection.index}] ${rejection.message}`);
    const more = rejected > told.length ? ` And ${rejected - told.length} more; see errors.` : "";
    message += `; ${rejected} ${dryRun ? "would be" : was(rejected)} rejected: ${told.join(" ")}${more}${capNote(rejected)}`;
  } else message += ".";
  const status = rejected === 0 ? JobStatus.Succeeded : rejected === total ? JobStatus.Failed : JobStatus.PartiallySucceeded;
  return { status, output: { message, total, applied: deleted + notFound, rejected, errors: errorsOf(rejections), deleted, notFound } };
}
