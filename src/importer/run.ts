import { statSync } from "node:fs";
import { createClient, ImportdCertificateError, ImportdConnectionError, ImportdProblem, type JobDocument } from "../client";
import type { ResourceDefinition } from "../resources/definition";
import { jsonMayHoldLoneSurrogate, validateBatch } from "../resources/validate";
import { Journal } from "./journal";
import { progressEntry, progressLine, type Progress } from "./progress";
import { RejectedFile, rejectedFilePath } from "./rejected-file";
import { csvHeaders, formatOf, readSource, type SourceRecord } from "./source";

export type ImportRun = {
  file: string;
  resource: ResourceDefinition;
  baseUrl: string;
  apiKey: string;
  /** Certificates to trust for HTTPS, instead of the system's (--ca-file). */
  ca?: string;
  validateOnly: boolean;
  /** Send every chunk as a dry run (?dryRun=true): the server says what applying would do, applies nothing. */
  dryRun?: boolean;
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

export const defaultChunkBytes = 7_500_000;
const maxJobsInFlight = 4;

/** A record that is not applied, and why; `text` is the record as JSON once it is no longer held parsed. */
type Rejection = { source: SourceRecord; reason: string; text?: string };
/** `local`: the unreadable rows that stood among this chunk's records, rejected without sending. */
type Chunk = { number: number; sources: SourceRecord[]; texts: string[]; bytes: number; local: Rejection[] };
const emptyChunk = (number: number): Chunk => ({ number, sources: [], texts: [], bytes: 2, local: [] });
const position = (source: SourceRecord) => source.line ?? source.index ?? 0;
const where = (source: SourceRecord) => (source.line !== undefined ? `line ${source.line}` : `index ${source.index}`);
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

/** Imports (or with validateOnly, checks) a file; returns the exit code: 0 all applied, 1 some rejected. */
export async function runImport(run: ImportRun): Promise<number> {
  const format = formatOf(run.file);
  const file = statSync(run.file);
  const client = createClient({ baseUrl: run.baseUrl, apiKey: run.apiKey, ca: run.ca });
  const totals = { read: 0, sent: 0, applied: 0, created: 0, updated: 0, unchanged: 0, rejected: 0, rejectedBeforeSending: 0, jobs: 0, jobsFromEarlier: 0, bytesRead: 0, fileRead: false };
  const started = performance.now();

  // A dry run keeps no journal: it changes nothing, so there is nothing to resume; running it again is the same.
  const opened = run.validateOnly || run.dryRun
    ? undefined
    : Journal.open(run.file, { resource: run.resource.path, baseUrl: run.baseUrl.replace(/\/+$/, ""), fileBytes: file.size, fileModifiedMs: file.mtimeMs }, run.chunkBytes, run.restart);
  if (opened?.note) run.note(opened.note);
  if (opened?.resumed && opened.resumed.chunks > 0) {
    run.note(
      `Resuming the import of ${run.file} started ${opened.resumed.startedAt}, which was interrupted: ${plural(opened.resumed.chunks, "request")} of it went through and ` +
        `${opened.resumed.chunks === 1 ? "is" : "are"} not sent again (--restart sends everything again).`,
    );
  }
  const journal = opened?.journal;
  const chunkBytes = journal?.chunkBytes ?? run.chunkBytes;
  const rejectedFile = run.validateOnly ? undefined : new RejectedFile(rejectedFilePath(run.file), format, format === "csv" ? await csvHeaders(run.file) : []);

  const snapshot = (job?: JobDocument): Progress => ({
    ...totals,
    total: totals.fileRead || totals.bytesRead === 0 ? totals.read : Math.max(totals.read, Math.round((totals.read * file.size) / totals.bytesRead)),
    totalKnown: totals.fileRead,
    elapsedMs: performance.now() - started,
    job,
  });
  const report = (job?: JobDocument) => run.progress(run.interactive ? progressLine(snapshot(job), run.columns()) : progressEntry(snapshot(job)));

  // Rejections are written (or, checking, printed) chunk by chunk in the file's order, each chunk's sorted
  // by line: a job's rejected records come back long after the unreadable rows read around them.
  const emit = (rejections: Rejection[]) => {
    rejections.sort((a, b) => position(a.source) - position(b.source));
    for (const { source, reason, text } of rejections) {
      if (rejectedFile) rejectedFile.add(source, reason, text);
      else run.out(`${where(source)}: ${reason}`);
    }
  };
  const pending: Array<Promise<Rejection[]>> = [];
  const drain = async (keep: number) => {
    while (pending.length > keep) emit(await pending.shift()!);
  };

  // Tied to the run, not only the content: a new run of a finished import queues new jobs, while a resumed
  // run gets the jobs its interrupted run queued, even one queued just before the journal line was written.
  const runId = journal?.runId ?? crypto.randomUUID();
  const idempotencyKey = (chunk: number, body: string) =>
    `importd-${run.dryRun ? "dry-" : ""}${runId}-${chunk}-${new Bun.CryptoHasher("sha256").update(`${run.resource.path}\n${body}`).digest("hex").slice(0, 32)}`;

  /**
   * Queues one chunk as one job (a request-time 400 sends it again without its bad records), or takes the
   * job the interrupted run queued for it; answers, once the job is done, the chunk's rejections.
   */
  const submit = async (chunk: Chunk): Promise<{ settling: Promise<Rejection[]> }> => {
    totals.sent += chunk.sources.length;
    const earlier = journal?.entry(chunk.number);
    const dropped = new Map<number, string>(earlier?.dropped ?? []);
    let job: JobDocument | undefined;
    let fromEarlier = false;
    if (earlier?.jobId != null) {
      try {
        job = await client.getJob(earlier.jobId);
        fromEarlier = true;
      } catch (error) {
        // Gone after its retention: then it is sent again, as a new job.
        if (!(error instanceof ImportdProblem) || error.status !== 404) throw error;
      }
    }
    const kept = () => chunk.sources.flatMap((_, at) => (dropped.has(at) ? [] : [at]));
    if (!job && !(earlier && earlier.jobId === null)) {
      for (let sending = kept(); sending.length > 0; sending = kept()) {
        const body = `[${sending.map((at) => chunk.texts[at]).join(",")}]`;
        try {
          const queued = await client.queueImport(run.resource.path as never, body, { idempotencyKey: idempotencyKey(chunk.number, body), dryRun: run.dryRun });
          job = queued.job;
          fromEarlier = queued.replayed;
          break;
        } catch (error) {
          if (!(error instanceof ImportdProblem) || error.status !== 400 || !error.errors) throw error;
          for (const [key, messages] of Object.entries(error.errors)) {
            const at = sending[Number(/^\[(\d+)\]/.exec(key)?.[1] ?? NaN)];
            if (at === undefined) throw error; // A body-level problem: not one record's fault.
            dropped.set(at, [dropped.get(at), ...messages].filter(Boolean).join(" "));
          }
        }
      }
      journal?.record({ chunk: chunk.number, jobId: job?.id ?? null, dropped: [...dropped] });
    }

    const rejections = [...chunk.local];
    for (const [at, message] of dropped) rejections.push({ source: chunk.sources[at]!, reason: message, text: chunk.texts[at] });
    totals.rejected += dropped.size;
    if (!job) return { settling: Promise.resolve(rejections) };
    totals.jobs++;
    if (fromEarlier) totals.jobsFromEarlier++;
    const inJob = kept();
    const queued = job;
    // The next chunk goes while this job runs (importd applies an environment's jobs in the order it
    // accepted them); only `maxJobsInFlight` are waited for at once, which bounds the records held here.
    // (Wrapped: an async function answering a promise would wait for it.)
    const settling = (async () => {
      const done = await client.waitForJob(queued.id, { onProgress: (current) => run.interactive && report(current) });
      totals.applied += done.output?.applied ?? 0;
      totals.created += done.output?.created ?? 0;
      totals.updated += done.output?.updated ?? 0;
      totals.unchanged += done.output?.unchanged ?? 0;
      if ((done.output?.rejected ?? 0) > 0) {
        for await (const record of client.rejectedRecords(done.id)) {
          const at = inJob[record.index]!;
          rejections.push({ source: chunk.sources[at]!, reason: record.message, text: chunk.texts[at] });
          totals.rejected++;
        }
      }
      report(done);
      return rejections;
    })();
    return { settling };
  };

  /** --validate-only: one line per problem, one count per record that has any. */
  const check = (chunk: Chunk): Rejection[] => {
    const rejections = [...chunk.local];
    const mayHoldLoneSurrogate = chunk.texts.some(jsonMayHoldLoneSurrogate);
    const validation = validateBatch(run.resource.schema, run.resource.rules as never, chunk.sources.map((source) => source.record), { mayHoldLoneSurrogate });
    if (validation.ok) return rejections;
    const withProblems = new Set<number>();
    for (const [key, messages] of Object.entries(validation.errors)) {
      const index = /^\[(\d+)\]\.?(.*)$/.exec(key);
      const source = index ? chunk.sources[Number(index[1])] : undefined;
      if (!source) {
        run.out(`${key}: ${messages.join(" ")}`);
        continue;
      }
      withProblems.add(Number(index![1]));
      rejections.push({ source, reason: `${index![2] || "record"}: ${messages.join(" ")}` });
    }
    totals.rejected += withProblems.size;
    return rejections;
  };

  let chunk = emptyChunk(0);
  const flush = async () => {
    if (chunk.sources.length === 0 && chunk.local.length === 0) return;
    const full = chunk;
    chunk = emptyChunk(full.number + 1);
    if (run.validateOnly || full.sources.length === 0) pending.push(Promise.resolve(run.validateOnly ? check(full) : full.local));
    else {
      const { settling } = await submit(full);
      // Its failure is thrown where it is awaited, in order; until then it must not count as unhandled.
      settling.catch(() => {});
      pending.push(settling);
      if (run.interactive) report();
    }
    await drain(maxJobsInFlight - 1);
    // Each chunk leaves tens of megabytes of garbage (cells, objects, JSON); collected now, the client's
    // memory stays flat whatever the file's size, instead of growing until the collector gets round to it.
    Bun.gc(true);
  };

  try {
    for await (const source of readSource(run.file, format, run.resource.schema, (bytes) => (totals.bytesRead += bytes))) {
      totals.read++;
      if (!source.record) {
        totals.rejected++;
        totals.rejectedBeforeSending++;
        chunk.local.push({ source, reason: source.problem ?? "unreadable" });
        continue;
      }
      const text = JSON.stringify(source.record);
      const bytes = Buffer.byteLength(text) + 1;
      // Once sent, a record is kept only as its text (and a CSV row as its cells, for the rejected file):
      // several chunks wait for their jobs at once, and the parsed objects would triple what they hold.
      if (!run.validateOnly) delete source.record;
      if (chunk.bytes + bytes > chunkBytes && chunk.sources.length > 0) await flush();
      chunk.sources.push(source);
      chunk.texts.push(text);
      chunk.bytes += bytes;
    }
    totals.fileRead = true;
    await flush();
    await drain(0);
  } catch (error) {
    if (!(error instanceof ImportdConnectionError) || run.validateOnly) throw error;
    throw new ImportdConnectionError(
      `${error.message}. ` +
        (totals.jobs > 0
          ? `It stopped answering after ${plural(totals.jobs, "job")} of this import had been queued (${totals.applied} records applied so far); what it queued is kept, and a job is applied whole or not at all. `
          : "Nothing of this import was queued. ") +
        (error instanceof ImportdCertificateError
          ? "Run the command again with the certificate trusted: the import resumes where it stopped."
          : "Once importd answers again, run the same command: the import resumes where it stopped."),
      { cause: error },
    );
  }
  await rejectedFile?.close();
  journal?.finish();

  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  if (run.validateOnly) {
    const references = run.resource.references.map((reference) => reference.field);
    run.out(
      `${run.file}: ${plural(totals.read, "record")} checked in ${seconds} s, ${totals.rejected === 0 ? "no problems" : `${totals.rejected} with problems`}. Nothing was sent.` +
        (references.length > 0 ? ` References (${references.join(", ")}) were not checked: whether they exist is checked against the environment's data when the job runs.` : ""),
    );
  } else if (run.dryRun) {
    run.out(
      `${run.file}: dry run, nothing was applied. ${totals.read} records: ${totals.applied} would be applied ` +
        `(${totals.created} created, ${totals.updated} updated, ${totals.unchanged} unchanged), ${totals.rejected} rejected, in ${plural(totals.jobs, "job")} and ${seconds} s.` +
        (totals.rejected > 0 ? ` The records that would be rejected, each with its reason, are in ${rejectedFile!.path}.` : "") +
        (totals.jobs > 1 ? " Each request was tried against the data as it is, without the requests before it." : ""),
    );
  } else {
    const earlier = totals.jobsFromEarlier;
    run.out(
      `${run.file}: ${totals.read} records, ${totals.applied} applied, ${totals.rejected} rejected, in ${plural(totals.jobs, "job")} and ${seconds} s` +
        (totals.rejectedBeforeSending > 0 ? ` (${totals.sent} sent; ${totals.rejectedBeforeSending} could not be read and ${totals.rejectedBeforeSending === 1 ? "was" : "were"} not sent).` : ".") +
        (earlier > 0
          ? ` ${earlier === totals.jobs ? `All ${totals.jobs} jobs` : `${earlier} of the ${totals.jobs} jobs`} had been queued by the interrupted run started ${journal!.startedAt}` +
            ` and ${earlier === 1 ? "was" : "were"} not sent again: ${earlier === 1 ? "its" : "their"} records are counted as ${earlier === 1 ? "that job" : "those jobs"} applied them then.`
          : "") +
        (totals.rejected > 0 ? ` The rejected records, each with its reason, are in ${rejectedFile!.path}: fix them there and run the same command on that file.` : ""),
    );
  }
  return totals.rejected === 0 ? 0 : 1;
}
