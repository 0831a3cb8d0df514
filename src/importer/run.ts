import { statSync } from "node:fs";
import { createClient, ImportdProblem, type JobDocument } from "../client";
import type { ResourceDefinition } from "../resources/definition";
import { validateBatch } from "../resources/validate";
import { RejectedFile, rejectedFilePath } from "./rejected-file";
import { csvHeaders, formatOf, readSource, type SourceRecord } from "./source";

export type ImportRun = {
  file: string;
  resource: ResourceDefinition;
  baseUrl: string;
  apiKey: string;
  validateOnly: boolean;
  /** Largest request body; under the 8 MB the service recommends. */
  chunkBytes: number;
  /** A terminal: one progress line redrawn in place; otherwise a plain line per request. */
  interactive: boolean;
  out: (line: string) => void;
  progress: (text: string) => void;
};

export const defaultChunkBytes = 7_500_000;
const maxJobsInFlight = 4;

type Chunk = { sources: SourceRecord[]; texts: string[]; bytes: number };
const emptyChunk = (): Chunk => ({ sources: [], texts: [], bytes: 2 });
const bar = (fraction: number, width = 24) => {
  const filled = Math.round(Math.min(1, fraction) * width);
  return `[${"#".repeat(filled)}${".".repeat(width - filled)}] ${Math.floor(Math.min(1, fraction) * 100)}%`;
};
const where = (source: SourceRecord) => (source.line !== undefined ? `line ${source.line}` : `index ${source.index}`);

/** Imports (or with validateOnly, checks) a file; returns the exit code: 0 all applied, 1 some rejected. */
export async function runImport(run: ImportRun): Promise<number> {
  const format = formatOf(run.file);
  const fileBytes = statSync(run.file).size;
  const client = createClient({ baseUrl: run.baseUrl, apiKey: run.apiKey });
  const rejected = run.validateOnly ? undefined : new RejectedFile(rejectedFilePath(run.file), format, format === "csv" ? await csvHeaders(run.file) : []);
  const totals = { read: 0, sent: 0, applied: 0, rejected: 0, jobs: 0, bytesRead: 0 };
  const started = performance.now();

  const reject = (source: SourceRecord, reason: string, text?: string) => {
    totals.rejected++;
    if (rejected) rejected.add(source, reason, text);
    else run.out(`${where(source)}: ${reason}`);
  };

  const report = (job?: JobDocument) => {
    const seconds = (performance.now() - started) / 1000;
    const rate = totals.sent / Math.max(seconds, 0.001);
    const eta = totals.bytesRead > 0 ? (seconds * (fileBytes - totals.bytesRead)) / totals.bytesRead : undefined;
    const text =
      `${totals.sent} records sent, ${totals.applied} applied, ${totals.rejected} rejected; ${Math.round(rate)} records/s` +
      (eta !== undefined && totals.bytesRead < fileBytes ? `, about ${Math.ceil(eta)} s left` : "") +
      (job ? ` (job ${job.id}: ${job.importJobStatus})` : "");
    run.progress(run.interactive ? `${bar(totals.bytesRead / Math.max(fileBytes, 1))} ${text}` : text);
  };

  /** Sends one chunk as one job and waits for it; a request-time 400 sends the chunk again without its bad records. */
  const submit = async (chunk: Chunk): Promise<void> => {
    const body = `[${chunk.texts.join(",")}]`;
    // Derived from the content: running the same file again answers the jobs already queued, so nothing
    // is applied twice and an interrupted import resumes where it stopped.
    const idempotencyKey = `import-${new Bun.CryptoHasher("sha256").update(`${run.resource.path}\n${body}`).digest("hex").slice(0, 48)}`;
    let job: JobDocument;
    try {
      job = await client.importRecords(run.resource.path as never, body, { idempotencyKey });
    } catch (error) {
      if (!(error instanceof ImportdProblem) || error.status !== 400 || !error.errors) throw error;
      const bad = new Map<number, string[]>();
      for (const [key, messages] of Object.entries(error.errors)) {
        const index = /^\[(\d+)\]/.exec(key)?.[1];
        if (index === undefined) throw error; // A body-level problem: not one record's fault.
        bad.set(Number(index), [...(bad.get(Number(index)) ?? []), ...messages]);
      }
      const rest = emptyChunk();
      chunk.sources.forEach((source, index) => {
        const messages = bad.get(index);
        if (messages) reject(source, messages.join(" "), chunk.texts[index]);
        else {
          rest.sources.push(source);
          rest.texts.push(chunk.texts[index]!);
        }
      });
      if (rest.sources.length > 0) await submit(rest);
      return;
    }
    totals.jobs++;
    totals.sent += chunk.sources.length;
    // The next chunk goes while this job runs (importd applies an environment's jobs in the order it
    // accepted them); only `maxJobsInFlight` are waited for at once, which bounds the records held here.
    const settling = settle(job, chunk);
    // Its failure is thrown where it is awaited, in order; until then it must not count as unhandled.
    settling.catch(() => {});
    inFlight.push(settling);
    if (inFlight.length >= maxJobsInFlight) await inFlight.shift();
  };

  const settle = async (job: JobDocument, { sources, texts }: Chunk) => {
    const done = await client.waitForJob(job.id, { onProgress: (current) => run.interactive && report(current) });
    totals.applied += done.output?.applied ?? 0;
    if ((done.output?.rejected ?? 0) > 0) {
      for await (const record of client.rejectedRecords(done.id)) reject(sources[record.index]!, record.message, texts[record.index]);
    }
    report(done);
  };
  const inFlight: Array<Promise<void>> = [];

  const check = (chunk: Chunk) => {
    const validation = validateBatch(run.resource.schema, run.resource.rules as never, chunk.sources.map((source) => source.record));
    totals.sent += chunk.sources.length;
    if (validation.ok) return;
    for (const [key, messages] of Object.entries(validation.errors)) {
      const index = /^\[(\d+)\]\.?(.*)$/.exec(key);
      const source = index ? chunk.sources[Number(index[1])] : undefined;
      if (source) reject(source, `${index![2] || "record"}: ${messages.join(" ")}`);
      else run.out(`${key}: ${messages.join(" ")}`);
    }
  };

  let chunk = emptyChunk();
  const flush = async () => {
    if (chunk.sources.length === 0) return;
    const full = chunk;
    chunk = emptyChunk();
    if (run.validateOnly) check(full);
    else await submit(full);
    // Each chunk leaves tens of megabytes of garbage (cells, objects, JSON); collected now, the client's
    // memory stays flat whatever the file's size, instead of growing until the collector gets round to it.
    Bun.gc(true);
  };

  for await (const source of readSource(run.file, format, run.resource.schema, (bytes) => (totals.bytesRead += bytes))) {
    totals.read++;
    if (!source.record) {
      reject(source, source.problem ?? "unreadable");
      continue;
    }
    const text = JSON.stringify(source.record);
    const bytes = Buffer.byteLength(text) + 1;
    // Once sent, a record is kept only as its text (and a CSV row as its cells, for the rejected file):
    // several chunks wait for their jobs at once, and the parsed objects would triple what they hold.
    if (!run.validateOnly) delete source.record;
    if (chunk.bytes + bytes > run.chunkBytes && chunk.sources.length > 0) await flush();
    chunk.sources.push(source);
    chunk.texts.push(text);
    chunk.bytes += bytes;
  }
  await flush();
  for (const waiting of inFlight.splice(0)) await waiting;
  await rejected?.close();

  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  if (run.validateOnly) {
    run.out(`${run.file}: ${totals.read} records checked in ${seconds} s, ${totals.rejected === 0 ? "no problems" : `${totals.rejected} with problems`}. Nothing was sent.`);
  } else {
    run.out(
      `${run.file}: ${totals.read} records, ${totals.applied} applied, ${totals.rejected} rejected, in ${totals.jobs} job${totals.jobs === 1 ? "" : "s"} and ${seconds} s.` +
        (totals.rejected > 0 ? ` The rejected records, each with its reason, are in ${rejected!.path}: fix them there and run the same command on that file.` : ""),
    );
  }
  return totals.rejected === 0 ? 0 : 1;
}
