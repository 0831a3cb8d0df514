import type { ImportdClient, JobDocument } from "../client";
import { ImportdProblem } from "../client";
import { JobOperation } from "../domain/job";
import type { ResourceDefinition } from "../resources/definition";
import { jsonMayHoldLoneSurrogate, validateBatch } from "../resources/validate";
import { Chunker } from "./chunker";
import { fingerprint } from "./idempotency";
import { readIds, type IdFormat } from "./id-source";
import { readSource, type CsvDialect, type Format, type SourceRecord } from "./source";
import { utf8Length, type InputFile } from "./text";

/**
 * The heart of an import, shared by `importd import` and the console's import (a Web Worker): a file's records read,
 * cut into requests (Chunker), each queued as a job through the public API, and each job waited for, with what it
 * rejected collected in the file's order. What is around it differs and stays outside: where the progress journal
 * and the rejected records are kept, and how progress is shown. Nothing here needs Node or a DOM. A delete
 * (`importd delete`) is the same walk over a file of ids (id-source.ts), each chunk queued as a delete job.
 */

/** The largest request body by default: under the 8 MB the service recommends. */
export const defaultChunkBytes = 7_500_000;

/** A record that is not applied, and why; `text` is the record as JSON once it is no longer held parsed. */
export type Rejection = { source: SourceRecord; reason: string; text?: string };

/** What became of an import's records so far, and of its jobs. */
export type ImportTotals = {
  read: number;
  sent: number;
  applied: number;
  created: number;
  updated: number;
  unchanged: number;
  /** A delete's: records deleted, and ids that named none (applied = deleted + notFound). */
  deleted: number;
  notFound: number;
  rejected: number;
  /** Unreadable records, rejected without sending; part of `rejected`. */
  rejectedBeforeSending: number;
  /**
   * Records the request refused (a 400 naming them), sent again without them: no job took them, so a sync does not
   * know them as sent (a mirror's completion would delete them). Part of `rejected`.
   */
  refusedByRequest: number;
  /**
   * Records put in a later request than an earlier record with the same id, which would have been in the same one.
   * An id repeated far apart needs nothing done (its records are in different requests anyway) and is not counted.
   */
  repeated: number;
  /** Jobs of the interrupted run taken from its ledger, and recognized by their Idempotency-Key. */
  jobsFromEarlier: number;
  replayed: number;
};

/** `dropped`: positions in the chunk refused at request time (400), with their messages; `jobId` null when all were. */
export type ChunkEntry = { chunk: number; jobId: number | null; dropped: Array<[number, string]> };

/**
 * Where an import keeps which job took each chunk, so that an interrupted import resumes without sending them again
 * (the CLI's progress file; the console's session storage). `runId` makes the Idempotency-Keys of its requests.
 */
export type Ledger = { runId: string; entry(chunk: number): ChunkEntry | undefined; record(entry: ChunkEntry): void };

export type ChunkedImportOptions = {
  input: InputFile;
  /** `text` only for a delete: a file of one id per line. */
  format: IdFormat;
  resource: ResourceDefinition;
  /** What the jobs do: upsert the file's records (an import, the default), or delete the ids it names. */
  operation?: JobOperation;
  /** What the survey found of a CSV file. */
  csv?: CsvDialect;
  client: ImportdClient;
  /** `validate`: nothing is sent; each record is checked here. `dry-run`: each request is sent as a dry run. */
  mode: "import" | "dry-run" | "validate";
  /** Largest request body. */
  chunkBytes: number;
  /** The open sync (a mirror) the import's jobs join (?sync=). */
  sync?: number;
  ledger: Ledger;
  /** How many jobs are waited for at once; each holds its chunk's records. */
  jobsInFlight: number;
  /** Each chunk's rejections, chunk by chunk in the file's order, each chunk's sorted by where they stood. */
  onRejections: (rejections: Rejection[]) => void;
  /** A record put in a later request than an earlier one with its id (the latest before it). */
  onRepeat?: (later: SourceRecord, earlier: SourceRecord, id: string) => void;
  /** A chunk queued (no job yet), a job moving, a job done (`done`). */
  onProgress?: (job: JobDocument | undefined, done: boolean) => void;
  /** A problem of the whole request found while validating, not of one record. */
  onRequestProblem?: (line: string) => void;
  /** Bytes of the file read, for progress. */
  onBytes?: (bytes: number) => void;
  /** After each chunk: the CLI collects its garbage there, to keep its memory flat. */
  afterChunk?: () => void;
};

/** `local`: the unreadable rows that stood among this chunk's records, rejected without sending. */
type Chunk = { number: number; sources: SourceRecord[]; texts: string[]; local: Rejection[] };
type Item = { source: SourceRecord; text: string; id: string | undefined };

const position = (source: SourceRecord) => source.line ?? source.index ?? 0;

/** The id a record is stored under, to keep two records of one id out of one request; lone surrogates are U+FFFD there. */
const idOf = (record: Record<string, unknown> | undefined) => (typeof record?.id === "string" ? record.id.toWellFormed() : undefined);

export class ChunkedImport {
  readonly totals: ImportTotals = { read: 0, sent: 0, applied: 0, created: 0, updated: 0, unchanged: 0, deleted: 0, notFound: 0, rejected: 0, rejectedBeforeSending: 0, refusedByRequest: 0, repeated: 0, jobsFromEarlier: 0, replayed: 0 };
  /** The jobs this import queued (or found queued by its interrupted run), in order, and each one's last state. */
  readonly jobs: JobDocument[] = [];
  private readonly pending: Array<Promise<Rejection[]>> = [];
  private chunks = 0;

  constructor(private readonly options: ChunkedImportOptions) {}

  get jobIds(): number[] {
    return this.jobs.map((job) => job.id);
  }

  /** Reads, sends and waits for the whole file; a failure (the server lost, a refused key) is thrown as it came. */
  async run(): Promise<void> {
    const { options, totals } = this;
    const validating = options.mode === "validate";
    const chunker = new Chunker<Item>(options.chunkBytes, 2, (later, earlier) => {
      totals.repeated++;
      options.onRepeat?.(later.source, earlier.source, later.id!);
    });
    let local: Rejection[] = [];
    const flush = async (items: Item[]) => {
      await this.handle({ number: this.chunks++, sources: items.map((item) => item.source), texts: items.map((item) => item.text), local });
      local = [];
    };
    const deleting = options.operation === JobOperation.Delete;
    const sources = deleting
      ? readIds(options.input, options.format, options.resource, options.csv, options.onBytes)
      : readSource(options.input, options.format as Format, options.resource.schema, options.csv, options.onBytes);
    for await (const source of sources) {
      totals.read++;
      if (!source.record) {
        totals.rejected++;
        totals.rejectedBeforeSending++;
        local.push({ source, reason: source.problem ?? "unreadable" });
        continue;
      }
      // A delete's request is an array of ids: each record stands for its id alone.
      const text = JSON.stringify(deleting ? source.record.id : source.record);
      const id = idOf(source.record);
      // Once sent, a record is kept only as its text (and a CSV row as its cells, for the rejected file):
      // several chunks wait for their jobs at once, and the parsed objects would triple what they hold.
      if (!validating) delete source.record;
      for (const ready of chunker.add({ source, text, id }, id, utf8Length(text) + 1)) await flush(ready.items);
    }
    for (const ready of chunker.end()) await flush(ready.items);
    if (local.length > 0) await flush([]);
    await this.drain(0);
  }

  /** A chunk cut: checked, or queued as a job (and waited for later); then, the rejections of chunks that are done. */
  private async handle(chunk: Chunk): Promise<void> {
    const { options } = this;
    if (chunk.sources.length === 0) this.pending.push(Promise.resolve(chunk.local));
    else if (options.mode === "validate") this.pending.push(Promise.resolve(this.check(chunk)));
    else {
      const { settling } = await this.submit(chunk);
      // Its failure is thrown where it is awaited, in order; until then it must not count as unhandled.
      settling.catch(() => {});
      this.pending.push(settling);
      options.onProgress?.(undefined, false);
    }
    await this.drain(options.jobsInFlight - 1);
    options.afterChunk?.();
  }

  /** Rejections are handed on chunk by chunk in the file's order: a job's come back long after the unreadable rows read around them. */
  private async drain(keep: number): Promise<void> {
    while (this.pending.length > keep) {
      const rejections = await this.pending.shift()!;
      rejections.sort((a, b) => position(a.source) - position(b.source));
      this.options.onRejections(rejections);
    }
  }

  /**
   * Queues one chunk as one job (a request-time 400 sends it again without its bad records), or takes the job the
   * interrupted run queued for it; answers, settled once the job is done, the chunk's rejections.
   */
  private async submit(chunk: Chunk): Promise<{ settling: Promise<Rejection[]> }> {
    const { options, totals } = this;
    const { client, ledger } = options;
    totals.sent += chunk.sources.length;
    const earlier = ledger.entry(chunk.number);
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
          const sendOptions = { idempotencyKey: this.idempotencyKey(chunk.number, body), dryRun: options.mode === "dry-run", sync: options.sync };
          const resource = options.resource.path as never;
          const queued = options.operation === JobOperation.Delete ? await client.queueDeletion(resource, body, sendOptions) : await client.queueImport(resource, body, sendOptions);
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
      ledger.record({ chunk: chunk.number, jobId: job?.id ?? null, dropped: [...dropped] });
    }

    const rejections = [...chunk.local];
    for (const [at, message] of dropped) rejections.push({ source: chunk.sources[at]!, reason: message, text: chunk.texts[at] });
    totals.rejected += dropped.size;
    totals.refusedByRequest += dropped.size;
    if (!job) return { settling: Promise.resolve(rejections) };
    const place = this.jobs.push(job) - 1;
    const inJob = kept();
    const queued = job;
    // The next chunk goes while this job runs (importd applies an environment's jobs in the order it accepted
    // them); only `jobsInFlight` are waited for at once, which bounds the records held here. (Wrapped: an
    // async function answering a promise would wait for it.)
    const settling = (async () => {
      const done = await client.waitForJob(queued.id, {
        onProgress: (current) => {
          this.jobs[place] = current;
          options.onProgress?.(current, false);
        },
      });
      this.jobs[place] = done;
      totals.applied += done.output?.applied ?? 0;
      totals.created += done.output?.created ?? 0;
      totals.updated += done.output?.updated ?? 0;
      totals.unchanged += done.output?.unchanged ?? 0;
      totals.deleted += done.output?.deleted ?? 0;
      totals.notFound += done.output?.notFound ?? 0;
      if ((done.output?.rejected ?? 0) > 0) {
        let listed = 0;
        for await (const record of client.rejectedRecords(done.id)) {
          const at = inJob[record.index]!;
          rejections.push({ source: chunk.sources[at]!, reason: record.message, text: chunk.texts[at] });
          totals.rejected++;
          listed++;
        }
        // A job that failed as a whole without a row per record (given up after its attempts, its payload lost):
        // every record it took is rejected, for the job's reason, so that the counts and the exit code say so.
        if (listed === 0 && done.output!.applied === 0) {
          for (const at of inJob) rejections.push({ source: chunk.sources[at]!, reason: done.output!.message, text: chunk.texts[at] });
          totals.rejected += inJob.length;
        }
      }
      options.onProgress?.(done, true);
      return rejections;
    })();
    return { settling };
  }

  /** Tied to the run, not only the content: a new run of a finished import queues new jobs, while a resumed run gets the jobs its interrupted run queued. */
  private idempotencyKey(chunk: number, body: string): string {
    const { mode, resource, ledger, operation } = this.options;
    // A deletion's keys differ from an import's: importd answers one key used for both with 422.
    const deleting = operation === JobOperation.Delete;
    return `importd-${mode === "dry-run" ? "dry-" : ""}${deleting ? "delete-" : ""}${ledger.runId}-${chunk}-${fingerprint(`${deleting ? "deletions/" : ""}${resource.path}\n${body}`)}`;
  }

  /** Validating: one rejection per problem, and one count per record that has any. */
  private check(chunk: Chunk): Rejection[] {
    const { options, totals } = this;
    const rejections = [...chunk.local];
    const mayHoldLoneSurrogate = chunk.texts.some(jsonMayHoldLoneSurrogate);
    const validation = validateBatch(options.resource.schema, options.resource.rules as never, chunk.sources.map((source) => source.record), { mayHoldLoneSurrogate });
    if (validation.ok) return rejections;
    const withProblems = new Set<number>();
    for (const [key, messages] of Object.entries(validation.errors)) {
      const index = /^\[(\d+)\]\.?(.*)$/.exec(key);
      const source = index ? chunk.sources[Number(index[1])] : undefined;
      if (!source) {
        options.onRequestProblem?.(`${key}: ${messages.join(" ")}`);
        continue;
      }
      withProblems.add(Number(index![1]));
      rejections.push({ source, reason: `${index![2] || "record"}: ${messages.join(" ")}` });
    }
    totals.rejected += withProblems.size;
    return rejections;
  }
}
