import { createReadStream, statSync } from "node:fs";
import { createClient, ImportdCertificateError, ImportdConnectionError, ImportdProblem, type JobDocument } from "../client";
import type { ResourceDefinition } from "../resources/definition";
import { jsonMayHoldLoneSurrogate, validateBatch } from "../resources/validate";
import { Chunker } from "./chunker";
import { shown } from "./fields";
import { Journal } from "./journal";
import { progressEntry, progressLine, type Progress } from "./progress";
import { RejectedFile } from "./rejected-file";
import { formatOf, readSource, type Format, type SourceRecord } from "./source";
import { importSummary, plural } from "./summary";
import { surveyFile, unknownFieldsMessage } from "./survey";
import { SourceError, type InputFile } from "./text";

export type ImportRun = {
  file: string;
  resource: ResourceDefinition;
  baseUrl: string;
  apiKey: string;
  /** Certificates to trust for HTTPS, instead of the system's (--ca-file). */
  ca?: string;
  /** --format: what the file holds, when its name does not say (or says wrong). */
  format?: Format;
  /** --delimiter: a CSV's delimiter, when detection from its header gets it wrong. */
  delimiter?: string;
  /** --ignore-unknown-columns: import a file whose columns (or fields) include some the resource does not define. */
  ignoreUnknownColumns?: boolean;
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
type Chunk = { number: number; sources: SourceRecord[]; texts: string[]; local: Rejection[] };
type Item = { source: SourceRecord; text: string };
const position = (source: SourceRecord) => source.line ?? source.index ?? 0;
const where = (source: SourceRecord) => (source.line !== undefined ? `line ${source.line}` : `index ${source.index}`);

/** The id a record is stored under, to keep two records of one id out of one request; lone surrogates are U+FFFD there. */
const idOf = (record: Record<string, unknown> | undefined) => (typeof record?.id === "string" ? record.id.toWellFormed() : undefined);

/** Imports (or with validateOnly, checks) a file; returns the exit code: 0 all applied, 1 some rejected. */
export async function runImport(run: ImportRun): Promise<number> {
  const format = run.format ?? formatOf(run.file);
  const file = statSync(run.file);
  if (file.isDirectory()) throw new SourceError(`${run.file} is a directory: give a file`);
  const started = performance.now();

  if (run.interactive) run.progress(`checking ${run.file}…`);
  const input: InputFile = { name: run.file, read: () => createReadStream(run.file) };
  const survey = await surveyFile(input, format, run.resource, { delimiter: run.delimiter });
  // A field the resource does not define would be dropped by the server without a word: said before anything is sent.
  let problemsOfFile = 0;
  if (survey.unknown.length > 0) {
    if (run.validateOnly) {
      for (const { name, where: at, suggestion } of survey.unknown) {
        run.out(`${at}: ${shown(name)} is not a field of ${run.resource.path}${suggestion ? `: did you mean ${suggestion}?` : ""} The import stops here unless --ignore-unknown-columns is given.`);
      }
      problemsOfFile = survey.unknown.length;
    } else if (!run.ignoreUnknownColumns) {
      throw new SourceError(unknownFieldsMessage(run.file, run.resource, survey.unknown, format));
    } else {
      run.note(`Not importing what ${run.resource.path} does not define (--ignore-unknown-columns): ${survey.unknown.map(({ name }) => shown(name)).join(", ")}.`);
    }
  }

  const client = createClient({ baseUrl: run.baseUrl, apiKey: run.apiKey, ca: run.ca });
  const totals = { read: 0, sent: 0, applied: 0, created: 0, updated: 0, unchanged: 0, rejected: 0, rejectedBeforeSending: 0, repeated: 0, jobsFromEarlier: 0, replayed: 0 };
  const jobIds: number[] = [];

  // A dry run keeps no journal: it changes nothing, so there is nothing to resume; running it again is the same.
  const opened = run.validateOnly || run.dryRun
    ? undefined
    : Journal.open(run.file, { resource: run.resource.path, baseUrl: run.baseUrl.replace(/\/+$/, ""), fileBytes: file.size, fileModifiedMs: file.mtimeMs }, run.chunkBytes, run.restart);
  if (opened?.note) run.note(opened.note);
  if (opened?.resumed && opened.resumed.chunks > 0) {
    run.note(
      `Resuming the import of ${run.file} started ${opened.resumed.startedAt}, which was interrupted: its progress file records ${plural(opened.resumed.chunks, "request")} that ` +
        `went through; ${opened.resumed.chunks === 1 ? "it is" : "they are"} not sent again (--restart sends everything again).`,
    );
  }
  const journal = opened?.journal;
  const chunkBytes = journal?.chunkBytes ?? run.chunkBytes;
  const rejectedFile = run.validateOnly ? undefined : RejectedFile.for(run.file, format, survey.csv?.headers);

  const snapshot = (job?: JobDocument): Progress => ({ ...totals, total: survey.records, totalKnown: true, elapsedMs: performance.now() - started, job });
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
    if (earlier?.jobId != null) {
      try {
        job = await client.getJob(earlier.jobId);
        totals.jobsFromEarlier++;
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
          if (queued.replayed) totals.replayed++;
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
    jobIds.push(job.id);
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

  let chunks = 0;
  let local: Rejection[] = [];
  const flush = async (items: Item[]) => {
    const chunk: Chunk = { number: chunks++, sources: items.map((item) => item.source), texts: items.map((item) => item.text), local };
    local = [];
    if (items.length === 0) pending.push(Promise.resolve(chunk.local));
    else if (run.validateOnly) pending.push(Promise.resolve(check(chunk)));
    else {
      const { settling } = await submit(chunk);
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
  const chunker = new Chunker<Item>(chunkBytes, 2, (later, earlier) => {
    totals.repeated++;
    if (run.validateOnly) {
      run.out(`${where(later.source)}: id ${shown(String(later.source.record?.id ?? JSON.parse(later.text).id))} is also on ${where(earlier.source)}; the later record wins (it is sent after the earlier one).`);
    }
  });

  try {
    for await (const source of readSource(input, format, run.resource.schema, survey.csv)) {
      totals.read++;
      if (!source.record) {
        totals.rejected++;
        totals.rejectedBeforeSending++;
        local.push({ source, reason: source.problem ?? "unreadable" });
        continue;
      }
      const text = JSON.stringify(source.record);
      const id = idOf(source.record);
      // Once sent, a record is kept only as its text (and a CSV row as its cells, for the rejected file):
      // several chunks wait for their jobs at once, and the parsed objects would triple what they hold.
      if (!run.validateOnly) delete source.record;
      for (const ready of chunker.add({ source, text }, id, Buffer.byteLength(text) + 1)) await flush(ready.items);
    }
    for (const ready of chunker.end()) await flush(ready.items);
    if (local.length > 0) await flush([]);
    await drain(0);
  } catch (error) {
    if (!(error instanceof ImportdConnectionError) || run.validateOnly) {
      // Nothing to resume: what stopped this run (the file, a refused key) stops the same command again.
      journal?.finish();
      throw error;
    }
    throw new ImportdConnectionError(
      `${error.message}. ` +
        (jobIds.length > 0
          ? `It stopped answering after ${plural(jobIds.length, "job")} of this import had been queued (${totals.applied} records applied so far); what it queued is kept, and a job is applied whole or not at all. `
          : "Nothing of this import was queued. ") +
        (error instanceof ImportdCertificateError
          ? "Run the command again with the certificate trusted: the import resumes where it stopped."
          : "Once importd answers again, run the same command: the import resumes where it stopped."),
      { cause: error },
    );
  }
  await rejectedFile?.close();
  journal?.finish();

  run.out(
    importSummary({
      file: run.file,
      resource: run.resource,
      mode: run.validateOnly ? "validate" : run.dryRun ? "dry-run" : "import",
      ...totals,
      problemsOfFile,
      jobIds,
      seconds: (performance.now() - started) / 1000,
      rejectedFile,
      resumedFrom: journal?.startedAt,
    }),
  );
  return totals.rejected + problemsOfFile === 0 ? 0 : 1;
}
