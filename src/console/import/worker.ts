import { createClient, ImportdConnectionError, ImportdProblem } from "../../client";
import { ChunkedImport, where, type Rejection } from "../../importer/chunked-import";
import { shown } from "../../importer/fields";
import { RejectedRows } from "../../importer/rejected-rows";
import { formatOf, SourceError } from "../../importer/source";
import { surveyFile, unknownFieldsMessage } from "../../importer/survey";
import type { InputFile } from "../../importer/text";
import { resourceByPath } from "../../resources/registry";
import { problemText } from "../problems";
import { inConsoleWords } from "./words";
import type { Counts, FromWorker, ImportOrder, ShownRejection } from "./protocol";

/**
 * The console's import, in a Web Worker so that the page stays responsive however big the file: the CLI's own survey,
 * readers, chunking and job handling (ChunkedImport), on a File read as a stream, a few megabytes at a time. Only
 * the rejected records are kept, as a Blob the browser may hold on disk; and the first of them for the page to show.
 */

/** Fewer than the CLI's 4: a browser opens at most 6 connections to a server, and the page needs some. */
const jobsInFlight = 3;
const rejectionsShown = 100;
const progressEveryMs = 250;

export function serveImports(): void {
  const post = (message: FromWorker) => postMessage(message);
  addEventListener("message", (event: MessageEvent<ImportOrder>) => {
    runOrder(event.data, post).catch((error) => post({ kind: "failed", message: String(error?.message ?? error), resumable: false }));
  });
}

async function runOrder(order: ImportOrder, post: (message: FromWorker) => void): Promise<void> {
  const resource = resourceByPath(order.resource);
  if (!resource) throw new Error(`no resource ${order.resource}`);
  const input: InputFile = { name: order.file.name, read: () => chunksOf(order.file.stream()) };
  const counts: Counts = { read: 0, sent: 0, applied: 0, created: 0, updated: 0, unchanged: 0, rejected: 0, rejectedBeforeSending: 0, repeated: 0, jobsFromEarlier: 0, replayed: 0, total: 0, bytesRead: 0, fileBytes: order.file.size };
  let importing: ChunkedImport | undefined;
  try {
    const format = order.format ?? formatOf(order.file.name);
    const survey = await surveyFile(input, format, resource, { delimiter: order.delimiter });
    if (survey.unknown.length > 0 && !order.ignoreUnknownColumns) throw new SourceError(unknownFieldsMessage(order.file.name, resource, survey.unknown, format));
    counts.total = survey.records;
    post({ kind: "surveyed", records: survey.records, format, ignored: survey.unknown.map(({ name }) => shown(name)) });

    const rows = new RejectedRows(format, survey.csv?.headers);
    const rejected = new RejectedBlob();
    const rejections: ShownRejection[] = [];
    const { runId, chunkBytes } = order.run;
    const entries = new Map(order.run.entries.map((entry) => [entry.chunk, entry]));
    let lastProgress = 0;
    const progress = (force = false) => {
      if (!force && performance.now() - lastProgress < progressEveryMs) return;
      lastProgress = performance.now();
      post({ kind: "progress", counts: { ...counts, ...importing!.totals } });
    };
    importing = new ChunkedImport({
      input,
      format,
      resource,
      csv: survey.csv,
      client: createClient({ baseUrl: order.baseUrl, apiKey: order.apiKey }),
      mode: order.dryRun ? "dry-run" : "import",
      chunkBytes,
      ledger: {
        runId,
        entry: (chunk) => entries.get(chunk),
        record: (entry) => post({ kind: "queued", runId, chunkBytes, entry }),
      },
      jobsInFlight,
      onRejections: (chunk: Rejection[]) => {
        for (const { source, reason, text } of chunk) {
          rejected.add(rows.add(source, reason, text));
          if (rejections.length < rejectionsShown) rejections.push({ where: where(source), reason, record: recordText(source.cells, source.raw, text) });
        }
      },
      onBytes: (bytes) => {
        counts.bytesRead += bytes;
        progress();
      },
      onProgress: (_job, done) => progress(done),
    });
    await importing.run();
    const name = order.file.name.replace(/(\.[^.]*)?$/, (extension) => `${order.dryRun ? ".dry-run" : ""}.rejected${extension}`);
    post({
      kind: "done",
      counts: { ...counts, ...importing.totals },
      jobs: importing.jobs.map(({ id, importJobStatus }) => ({ id, importJobStatus })),
      rejections,
      rejectedFile: rows.count > 0 ? { blob: rejected.end(rows.end(), format), name } : undefined,
    });
  } catch (error) {
    const resumable = error instanceof ImportdConnectionError && !order.dryRun;
    const queued = importing?.jobIds.length ?? 0;
    post({
      kind: "failed",
      message:
        error instanceof SourceError
          ? inConsoleWords(error.message)
          : error instanceof ImportdProblem || error instanceof ImportdConnectionError
            ? `${problemText(error)}${resumable ? ` ${queued > 0 ? `${queued} of this import's jobs had been queued; importd applies them whatever happens here.` : "Nothing of this import was queued."} Once importd answers, choose the file again to send the rest.` : ""}`
            : String((error as Error)?.message ?? error),
      resumable,
    });
  }
}

/** A File's stream as an async iterable of byte chunks (Chromium's ReadableStream is not iterable yet everywhere). */
async function* chunksOf(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

/** The rejected records' text, gathered into Blobs a megabyte at a time: the browser may keep big ones on disk. */
class RejectedBlob {
  private blob = new Blob([]);
  private pending: string[] = [];
  private pendingLength = 0;

  add(text: string): void {
    this.pending.push(text);
    this.pendingLength += text.length;
    if (this.pendingLength > 1_000_000) this.flush();
  }

  end(text: string, format: string): Blob {
    this.pending.push(text);
    this.flush();
    return new Blob([this.blob], { type: format === "csv" ? "text/csv;charset=utf-8" : format === "json" ? "application/json" : "application/x-ndjson" });
  }

  private flush(): void {
    this.blob = new Blob([this.blob, ...this.pending]);
    this.pending = [];
    this.pendingLength = 0;
  }
}

/** A rejected record as the page shows it: a CSV row's cells, or the JSON as it was. */
function recordText(cells: string[] | undefined, raw: string | undefined, text: string | undefined): string {
  const full = cells ? cells.join(" | ") : (raw ?? text ?? "");
  return full.length > 300 ? `${full.slice(0, 300)}…` : full;
}
