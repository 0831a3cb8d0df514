import type { ResourceDefinition } from "../resources/definition";
import type { ImportTotals } from "./chunked-import";

/** The last line of `importd import`: what happened to every record of the file, and where to go on from. */

export const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
const wasWere = (n: number) => (n === 1 ? "was" : "were");

export type Summary = ImportTotals & {
  file: string;
  resource: ResourceDefinition;
  mode: "import" | "dry-run" | "validate";
  /** --validate-only: columns (or fields) the resource does not define. */
  problemsOfFile: number;
  jobIds: number[];
  seconds: number;
  rejectedFile?: { path: string; kept: string[]; rejected: number };
  resumedFrom?: string;
};

/** `job 17`, `jobs 17, 18, 19`, `jobs 17, 18, … 146`: so that `importd jobs show` can find them. */
function jobList(ids: number[]): string {
  if (ids.length === 0) return "";
  if (ids.length === 1) return `job ${ids[0]}`;
  return `jobs ${ids.length <= 6 ? ids.join(", ") : `${ids.slice(0, 2).join(", ")}, … ${ids.at(-1)}`}`;
}

const parenthesis = (...parts: string[]) => (parts.some(Boolean) ? ` (${parts.filter(Boolean).join("; ")})` : "");

export function importSummary(s: Summary): string {
  const seconds = s.seconds.toFixed(1);
  const references = s.resource.references.map((reference) => reference.field);
  const repeated =
    s.repeated === 0
      ? ""
      : ` ${plural(s.repeated, "record")} had the id of a record shortly before ${s.repeated === 1 ? "it" : "them"} and ${wasWere(s.repeated)} sent in a later request, so the later record wins.`;
  if (s.mode === "validate") {
    const problems = [s.rejected > 0 ? `${s.rejected} with problems` : "", s.problemsOfFile > 0 ? `${plural(s.problemsOfFile, "column")} that ${s.resource.path} does not define` : ""].filter(Boolean);
    return (
      `${s.file}: ${plural(s.read, "record")} checked in ${seconds} s, ${problems.length === 0 ? "no problems" : problems.join(", ")}. Nothing was sent.` +
      (references.length > 0 ? ` References (${references.join(", ")}) were not checked: whether they exist is checked against the environment's data when the job runs.` : "") +
      (s.repeated === 0 ? "" : ` ${plural(s.repeated, "record")} had the id of a record shortly before ${s.repeated === 1 ? "it" : "them"}: importing sends ${s.repeated === 1 ? "it" : "each"} in a later request, so the later record wins.`)
    );
  }
  const kept = keptNote(s.rejectedFile);
  const rejectedFile = s.rejected > 0 && s.rejectedFile ? s.rejectedFile.path : undefined;
  if (s.mode === "dry-run") {
    return (
      `${s.file}: dry run, nothing was applied. ${plural(s.read, "record")}: ${s.applied} would be applied ` +
      `(${s.created} created, ${s.updated} updated, ${s.unchanged} unchanged), ${s.rejected} rejected, in ${plural(s.jobIds.length, "job")} and ${seconds} s${parenthesis(jobList(s.jobIds))}.` +
      (rejectedFile ? ` The records that would be rejected, each with its reason, are in ${rejectedFile}.` : "") +
      (s.jobIds.length > 1 ? " Each request was tried against the data as it is, without the requests before it." : "") +
      repeated +
      kept
    );
  }
  const jobs = s.jobIds.length;
  return (
    `${s.file}: ${plural(s.read, "record")}, ${s.applied} applied, ${s.rejected} rejected, in ${plural(jobs, "job")} and ${seconds} s` +
    parenthesis(jobList(s.jobIds), s.rejectedBeforeSending > 0 ? `${s.sent} sent, ${s.rejectedBeforeSending} could not be read and ${wasWere(s.rejectedBeforeSending)} not sent` : "") +
    "." +
    resumedNote(s, "records", "applied") +
    repeated +
    (rejectedFile ? ` The rejected records, each with its reason, are in ${rejectedFile}: fix them there and run the same command on that file.` : "") +
    kept
  );
}

/** Jobs that the interrupted run this one resumed had queued, which were not sent again. */
function resumedNote(s: Summary, things: string, done: string): string {
  const earlier = s.jobsFromEarlier + s.replayed;
  const jobs = s.jobIds.length;
  if (earlier === 0) return "";
  return (
    ` ${earlier === jobs ? `All ${plural(jobs, "job")}` : `${earlier} of the ${jobs} jobs`} had been queued by the interrupted run started ${s.resumedFrom}` +
    ` and ${wasWere(earlier)} not sent again` +
    (s.replayed > 0 ? ` (${s.jobsFromEarlier} recorded in its progress file, and ${s.replayed} sent just before it stopped, recognized by ${s.replayed === 1 ? "its" : "their"} Idempotency-Key)` : "") +
    `: ${earlier === 1 ? "its" : "their"} ${things} are counted as ${earlier === 1 ? "that job" : "those jobs"} ${done} them then.`
  );
}

/**
 * The last line of `importd delete`: how many ids were deleted, not found (not an error: deleting is idempotent) or
 * rejected, and where the rejected ones are. The reasons follow it (run.ts).
 */
export function deleteSummary(s: Summary): string {
  const seconds = s.seconds.toFixed(1);
  const rejectedFile = s.rejected > 0 && s.rejectedFile ? s.rejectedFile.path : undefined;
  const jobs = `in ${plural(s.jobIds.length, "job")} and ${seconds} s`;
  const unread = s.rejectedBeforeSending > 0 ? `${s.rejectedBeforeSending} could not be read and ${wasWere(s.rejectedBeforeSending)} not sent` : "";
  if (s.mode === "dry-run") {
    return (
      `${s.file}: dry run, nothing was deleted. ${plural(s.read, "id")}: would delete ${s.deleted}, would not find ${s.notFound}, would reject ${s.rejected}, ${jobs}${parenthesis(jobList(s.jobIds), unread)}.` +
      (s.notFound > 0 ? ` Not found: no such record (never imported, or deleted already); not an error.` : "") +
      (rejectedFile ? ` The ids that would be rejected, each with its reason, are in ${rejectedFile}.` : "") +
      keptNote(s.rejectedFile)
    );
  }
  return (
    `${s.file}: ${plural(s.read, "id")}, ${s.deleted} deleted, ${s.notFound} not found, ${s.rejected} rejected, ${jobs}${parenthesis(jobList(s.jobIds), unread)}.` +
    resumedNote(s, "ids", "deleted") +
    (s.notFound > 0 ? ` Not found: no such record (never imported, or deleted already); not an error.` : "") +
    (rejectedFile ? ` The rejected ids, each with its reason, are in ${rejectedFile}: once their reason is dealt with, run the same command on that file.` : "") +
    keptNote(s.rejectedFile)
  );
}

/** Rejected files of earlier runs that the user changed, which this run left alone. */
function keptNote(file: Summary["rejectedFile"]): string {
  if (!file || file.kept.length === 0) return "";
  const [one, it] = file.kept.length === 1 ? ["was", "it"] : ["were", "them"];
  return ` ${file.kept.join(" and ")} ${one} changed since importd wrote ${it}, so this run left ${it} as ${file.kept.length === 1 ? "it is" : "they are"}.`;
}
