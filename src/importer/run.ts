import { createReadStream, statSync } from "node:fs";
import { createClient, ImportdCertificateError, ImportdConnectionError, ImportdProblem, isTransient, type JobDocument, type Resource } from "../client";
import { JobOperation } from "../domain/job";
import type { ResourceDefinition } from "../resources/definition";
import { ChunkedImport, type Rejection } from "./chunked-import";
import { newRunId } from "./idempotency";
import { shown } from "./fields";
import { Journal } from "./journal";
import { completeMirror, joinOrOpenSync, unknownToSync, type MirrorLimits } from "./mirror";
import { progressEntry, progressLine, type Progress } from "./progress";
import { RejectedFile } from "./rejected-file";
import { formatOf, where, type Format, type SourceRecord } from "./source";
import { idCsvDialect, idFormatOf, surveyIds, type IdFormat } from "./id-source";
import { deleteSummary, importSummary, plural } from "./summary";
import { surveyFile, unknownFieldsError } from "./survey";
import { SourceError, type InputFile } from "./text";

export type ImportRun = {
  file: string;
  resource: ResourceDefinition;
  baseUrl: string;
  apiKey: string;
  /** Certificates to trust for HTTPS, instead of the system's (--ca-file). */
  ca?: string;
  /** What the file's records are for: upserted (an import, the default), or deleted by id (`importd delete`). */
  operation?: JobOperation;
  /** --format: what the file holds, when its name does not say (or says wrong); `text` (one id per line) for a delete only. */
  format?: IdFormat;
  /** --delimiter: a CSV's delimiter, when detection from its header gets it wrong. */
  delimiter?: string;
  /** --ignore-unknown-columns: import a file whose columns (or fields) include some the resource does not define. */
  ignoreUnknownColumns?: boolean;
  validateOnly: boolean;
  /** Send every chunk as a dry run (?dryRun=true): the server says what applying would do, applies nothing. */
  dryRun?: boolean;
  /**
   * Mirror the file (--mirror): send it in a sync, then complete the sync, which deletes the resource's records the
   * file does not have, within these limits (the server's default when none). With dryRun, say what it would delete.
   */
  mirror?: MirrorLimits;
  /** Ignore the progress journal of an interrupted run: send everything again. */
  restart: boolean;
  /** Largest request body; under the 8 MB the service recommends. */
  chunkBytes: number;
  /** A terminal: one progress line redrawn in place; otherwise a plain line per job. */
  interactive: boolean;
  /** The terminal's width now (it may be resized while the import runs). */
  columns: () => number;
  out: (line: string) => void;
  /** What the user should know before the counts start (a resumed run, a journal set aside). */
  note: (line: string) => void;
  progress: (text: string) => void;
};

const maxJobsInFlight = 4;

/** A checking run's line for a record put behind an earlier one with its id. */
const repeatLine = (later: SourceRecord, earlier: SourceRecord, id: string) =>
  `${where(later)}: id ${shown(id)} is also on ${where(earlier)}; the later record wins (it is sent after the earlier one).`;

/** How many rejected ids a delete names, with their reasons, after its summary; the rejected file has them all. */
const rejectionsTold = 10;

/**
 * Imports (or with validateOnly, checks) a file, or deletes the ids a file names; returns the exit code: 0 all applied
 * (deleted or not found), 1 some rejected.
 */
export async function runImport(run: ImportRun): Promise<number> {
  const deleting = run.operation === JobOperation.Delete;
  const format = run.format ?? (deleting ? idFormatOf(run.file) : formatOf(run.file));
  const file = statSync(run.file);
  if (file.isDirectory()) throw new SourceError(`${run.file} is a directory: give a file`);
  const started = performance.now();

  if (run.interactive) run.progress(`checking ${run.file}…`);
  const input: InputFile = { name: run.file, read: () => createReadStream(run.file) };
  const survey = deleting
    ? await surveyIds(input, format, run.resource, { delimiter: run.delimiter })
    : await surveyFile(input, format as Format, run.resource, { delimiter: run.delimiter });
  // A field the resource does not define would be dropped by the server without a word: said before anything is sent.
  let problemsOfFile = 0;
  if (survey.unknown.length > 0) {
    if (run.validateOnly) {
      for (const { name, where: at, suggestion } of survey.unknown) {
        run.out(`${at}: ${shown(name)} is not a field of ${run.resource.path}${suggestion ? `: did you mean ${suggestion}?` : ""} The import stops here unless --ignore-unknown-columns is given.`);
      }
      problemsOfFile = survey.unknown.length;
    } else if (!run.ignoreUnknownColumns) {
      throw unknownFieldsError(run.file, run.resource, survey.unknown, format as Format);
    } else {
      run.note(`Not importing what ${run.resource.path} does not define (--ignore-unknown-columns): ${survey.unknown.map(({ name }) => shown(name)).join(", ")}.`);
    }
  }

  const client = createClient({ baseUrl: run.baseUrl, apiKey: run.apiKey, ca: run.ca });

  // A dry run keeps no journal: it changes nothing, so there is nothing to resume; running it again is the same.
  const opened = run.validateOnly || run.dryRun
    ? undefined
    : Journal.open(run.file, { resource: run.resource.path, baseUrl: run.baseUrl.replace(/\/+$/, ""), fileBytes: file.size, fileModifiedMs: file.mtimeMs, ...(deleting ? { operation: JobOperation.Delete } : {}), ...(run.mirror ? { mirror: true as const } : {}) }, run.chunkBytes, run.restart);
  if (opened?.note) run.note(opened.note);
  if (opened?.resumed && opened.resumed.chunks > 0) {
    run.note(
      `Resuming the ${deleting ? "delete" : run.mirror ? "mirror" : "import"} of ${run.file} started ${opened.resumed.startedAt}, which ${run.mirror ? "did not finish (interrupted, or stopped before deleting)" : "was interrupted"}: its progress file records ${plural(opened.resumed.chunks, "request")} that ` +
        `went through; ${opened.resumed.chunks === 1 ? "it is" : "they are"} not sent again (--restart sends everything again).`,
    );
  }
  const journal = opened?.journal;
  // A mirror's chunks go in its sync: the interrupted run's, when this run resumes it. A dry run's go, as dry runs, in a
  // sync of their own, which its dry-run completion counts from (and which then expires unused).
  const sync = !run.mirror
    ? undefined
    : journal
      ? await joinOrOpenSync(client, run.resource, journal, opened?.resumed?.chunks ?? 0, run.note)
      : run.dryRun
        ? await client.openSync(run.resource.path as Resource)
        : undefined;
  // A text file of ids gets a CSV rejected file (ids.txt → ids.rejected.csv): id, _error, _line, which importd delete reads again.
  const rejectedFile = run.validateOnly
    ? undefined
    : format === "text"
      ? RejectedFile.for(`${run.file.replace(/\.[^./]*$/, "")}.csv`, "csv", idCsvDialect)
      : RejectedFile.for(run.file, format, survey.csv);
  const told: Rejection[] = [];

  const importing: ChunkedImport = new ChunkedImport({
    input,
    format,
    resource: run.resource,
    operation: run.operation,
    csv: survey.csv,
    client,
    mode: run.validateOnly ? "validate" : run.dryRun ? "dry-run" : "import",
    chunkBytes: journal?.chunkBytes ?? run.chunkBytes,
    sync: sync?.id,
    ledger: journal ?? { runId: newRunId(), entry: () => undefined, record: () => {} },
    jobsInFlight: maxJobsInFlight,
    onRejections: (rejections) => {
      for (const rejection of rejections) {
        const { source, reason, text } = rejection;
        if (deleting && told.length < rejectionsTold) told.push(rejection);
        if (rejectedFile) rejectedFile.add(source, reason, text);
        else run.out(`${where(source)}: ${reason}`);
      }
    },
    onRepeat: (later, earlier, id) => run.validateOnly && run.out(repeatLine(later, earlier, id)),
    onRequestProblem: run.out,
    onProgress: (job, done) => (done ? report(job) : run.interactive && report(job)),
    // Each chunk leaves tens of megabytes of garbage (cells, objects, JSON); collected now, the client's
    // memory stays flat whatever the file's size, instead of growing until the collector gets round to it.
    afterChunk: () => Bun.gc(true),
  });
  const { totals } = importing;
  const snapshot = (job?: JobDocument): Progress => ({
    ...totals,
    total: survey.records,
    totalKnown: true,
    elapsedMs: performance.now() - started,
    job,
    deletes: deleting ? { deleted: totals.deleted, notFound: totals.notFound } : undefined,
    dryRun: run.dryRun,
  });
  const report = (job?: JobDocument) => run.progress(run.interactive ? progressLine(snapshot(job), run.columns()) : progressEntry(snapshot(job)));

  try {
    await importing.run();
  } catch (error) {
    if (!isTransient(error) || run.validateOnly) {
      // Nothing to resume: what stopped this run (the file, a refused key) stops the same command again.
      journal?.finish();
      // A mirror's sync that ended while the file was sent (it expired): the server's words name its API, the command is simpler.
      if (sync && error instanceof ImportdProblem && error.status === 409) {
        throw new SourceError(`the mirror's sync ${sync.id} ended while the file was being sent (${error.detail ?? error.message}). Nothing was deleted. Run the same command again: it opens a new sync and sends the whole file in it.`);
      }
      throw error;
    }
    // importd answered 5xx or 429 after the retries: the progress file is kept for the same command to resume.
    if (!(error instanceof ImportdConnectionError)) throw error;
    const jobs = importing.jobIds.length;
    throw new ImportdConnectionError(
      `${error.message}. ` +
        (jobs > 0
          ? `It stopped answering after ${plural(jobs, "job")} of this import had been queued (${totals.applied} records applied so far); what it queued is kept, and a job is applied whole or not at all. `
          : "Nothing of this import was queued. ") +
        (error instanceof ImportdCertificateError
          ? "Run the command again with the certificate trusted: the import resumes where it stopped."
          : "Once importd answers again, run the same command: the import resumes where it stopped."),
      { cause: error },
    );
  }
  await rejectedFile?.close();
  if (!sync) journal?.finish();

  run.out(
    (deleting ? deleteSummary : importSummary)({
      file: run.file,
      resource: run.resource,
      mode: run.validateOnly ? "validate" : run.dryRun ? "dry-run" : "import",
      ...totals,
      problemsOfFile,
      jobIds: importing.jobIds,
      seconds: (performance.now() - started) / 1000,
      rejectedFile,
      resumedFrom: journal?.startedAt,
    }),
  );
  for (const { source, reason, text } of told) {
    // Sent ids are held as their JSON text only; an id read but not sent (unreadable) has none.
    const id = source.record?.id ?? (text === undefined ? undefined : JSON.parse(text));
    run.out(`  ${where(source)}${id === undefined ? "" : ` ${shown(String(id))}`}: ${reason}`);
  }
  if (deleting && totals.rejected > told.length) run.out(`  and ${totals.rejected - told.length} more${rejectedFile && rejectedFile.rejected > 0 ? `, all in ${rejectedFile.path}` : ""}.`);
  const imported = totals.rejected + problemsOfFile === 0 ? 0 : 1;
  if (!sync || !(journal || run.dryRun)) return imported;

  // A record no job took is not sent as far as the sync knows: completing would delete it, though the file has it.
  const notSent = unknownToSync(totals);
  if (notSent > 0) {
    journal?.finish();
    run.out(
      `The mirror is not completed, so nothing is deleted: ${plural(notSent, "record")} of the file ${notSent === 1 ? "was" : "were"} refused before any job took ${notSent === 1 ? "it" : "them"} ` +
        `(${rejectedFile && rejectedFile.rejected > 0 ? `in ${rejectedFile.path}` : "above"}), so importd does not know ${notSent === 1 ? "it is" : "they are"} in the file and completing sync ${sync.id} would delete ${notSent === 1 ? "it" : "them"}. ` +
        `Fix ${notSent === 1 ? "it" : "them"} in ${run.file} itself (a mirror of the rejected file alone would delete every other record) and run the same command again: ` +
        "a new sync is opened and the whole file sent in it (this one expires unused).",
    );
    return 1;
  }
  const { code, job } = await completeMirror(client, sync, { ...run.mirror!, dryRun: run.dryRun }, run.out, run.progress);
  if (!journal) return Math.max(imported, code);
  // A completion that ended the sync, or one after a job of the sync that failed as a whole (resuming would not send
  // its chunk again), leaves nothing to resume; one stopped by a guard leaves the sync open for the same command to
  // complete again with a higher limit, without sending the file again.
  const failedAsAWhole = importing.jobs.some((one) => one.importJobStatus === "Failed" && one.output?.applied === 0 && (one.output?.errors.length ?? 0) === 0);
  if (job.importJobStatus !== "Failed" || failedAsAWhole) journal.finish();
  return Math.max(imported, code);
}
