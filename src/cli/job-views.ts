// How `importd jobs` shows jobs and rejected records: for a person (a table, a summary) and for a script (CSV, NDJSON).
// Pure functions from the API's documents to lines, so that the command itself is only about asking the server.
import type { JobDocument, RejectedRecord } from "../client";
import { JobOperation, operationMeanings } from "../domain/job";
import { count, elapsed } from "../jobs/figures";

type Column = { header: string; right?: boolean; cell: (job: JobDocument) => string };

// Sized to fit 80 columns with the widest type (AssetCategory) and status (PartiallySucceeded) on one page: the
// creation time without its year and seconds (`jobs show` has it whole), and a dry run marked by a star, not a column.
const tableColumns: Column[] = [
  { header: "ID", right: true, cell: (job) => String(job.id) },
  { header: "TYPE", cell: (job) => job.importJobType },
  { header: "STATUS", cell: (job) => `${job.importJobStatus}${job.dryRun ? "*" : ""}` },
  { header: "RECORDS", right: true, cell: (job) => count(job.recordCount) },
  // Known once the job has finished.
  { header: "APPLIED", right: true, cell: (job) => (job.output ? count(job.output.applied) : "-") },
  { header: "REJECTED", right: true, cell: (job) => (job.output ? count(job.output.rejected) : "-") },
  { header: "CREATED UTC", cell: (job) => job.createdAt.slice(5, 16).replace("T", " ") },
];

// What a job does, after its type: shown only when a delete job is listed, so that a list of imports keeps its 80
// columns. The operations as the API and --operation say them.
const operationColumn: Column = { header: "OP", cell: (job) => job.operation };

export const dryRunLegend = "* a dry run: nothing was applied";

/** The jobs as a table with a header row, columns as wide as their widest cell; the legend when a dry run is listed. */
export function jobTable(jobs: readonly JobDocument[]): string[] {
  const columns = jobs.some((job) => job.operation !== JobOperation.Upsert) ? [...tableColumns.slice(0, 2), operationColumn, ...tableColumns.slice(2)] : tableColumns;
  const rows = [columns.map((column) => column.header), ...jobs.map((job) => columns.map((column) => column.cell(job)))];
  const widths = columns.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  const lines = rows.map((row) => row.map((cell, i) => (columns[i]!.right ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join("  ").trimEnd());
  return jobs.some((job) => job.dryRun) ? [...lines, dryRunLegend] : lines;
}

/** One job for a person: what it is, what it did, when, and its message. */
export function jobSummary(job: JobDocument): string[] {
  const row = (label: string, value: string) => `  ${label.padEnd(13)}${value}`;
  const output = job.output;
  const lines = [
    `job ${job.id}: ${job.importJobStatus}${output?.canceled ? " (canceled on request before it started)" : ""}`,
    row("type", job.importJobType),
    row("operation", `${job.operation}: ${operationMeanings[job.operation as JobOperation] ?? "unknown to this importd"}`),
    row("dry run", job.dryRun ? "yes: nothing was applied; the counts say what applying would have done" : "no"),
    row("records", count(job.recordCount)),
  ];
  if (output) {
    // Jobs finished by an importd from before these counts have only `applied`; a delete job's are its own.
    const split =
      job.operation === JobOperation.Delete
        ? ` (${count(output.deleted ?? 0)} deleted, ${count(output.notFound ?? 0)} not found)`
        : job.operation === JobOperation.SyncCompletion
          ? ` (${count(output.deleted ?? 0)} deleted, of ${count(output.total)} the sync did not send)`
          : output.created === undefined
          ? ""
          : ` (${count(output.created)} created, ${count(output.updated ?? 0)} updated, ${count(output.unchanged ?? 0)} unchanged)`;
    lines.push(row("applied", `${count(output.applied)}${split}`), row("rejected", count(output.rejected)));
  } else {
    lines.push(row("applied", `not known until it has finished (importd jobs show ${job.id} --wait)`));
  }
  lines.push(
    row("created at", job.createdAt),
    row("started at", job.startedAt ? `${job.startedAt} (after ${elapsed(job.createdAt, job.startedAt)} in the queue)` : "not yet"),
    row("completed at", job.completedAt ? `${job.completedAt}${job.startedAt ? ` (ran ${elapsed(job.startedAt, job.completedAt)})` : ""}` : "not yet"),
  );
  if (output) lines.push(row("message", output.message));
  if (output && output.rejected > 0) lines.push("", `The rejected ${job.operation === JobOperation.Upsert ? "records, as sent" : "ids"}, each with why: importd jobs rejected ${job.id}`);
  return lines;
}

/** A rejected record as the JSON format gives it: as sent, with why (`_error`) and where it stood in its batch (`_index`). */
export const rejectedJson = (rejected: RejectedRecord) => JSON.stringify({ ...rejected.record, _error: rejected.message, _index: rejected.index });
