import { createClient, ImportdConnectionError, ImportdProblem, isTransient } from "../../client";
import { ChunkedImport, type Rejection } from "../../importer/chunked-import";
import { shown } from "../../importer/fields";
import { rejectedFileName, RejectedRows } from "../../importer/rejected-rows";
import { formatOf, SourceError, where } from "../../importer/source";
import { surveyFile, unknownFieldsError } from "../../importer/survey";
import type { InputFile } from "../../importer/text";
import { resourceByPath } from "../../resources/registry";
import { problemText } from "../problems";
import { shownReason } from "../reasons";
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
const smallestChunkBytes = 100_000;
const progressEveryMs = 250;

export function serveImports(): void {
  const post = (message: FromWorker) => postMessage(message);
  addEventListener("message", (event: MessageEvent<ImportOrder>) => {
    runOrder(event.data, post).catch((error) => post({ type: "failed", message: String(error?.message ?? error), resumable: event.data.run.entries.length > 0 }));
  });
}

async function runOrder(order: ImportOrder, post: (message: FromWorker) => void): Promise<void> {
  const resource = resourceByPath(order.resource);
  if (!resource) throw new Error(`no resource ${order.resource}`);
  const input: InputFile = { name: order.file.name, read: () => chunksOf(order.file.stream()) };
  let importing: ChunkedImport | undefined;
  let total = 0;
  let bytesRead = 0;
  const counts = (): Counts => ({ ...importing!.totals, total, bytesRead, fileBytes: order.file.size });
  try {
    const format = order.format ?? formatOf(order.file.name);
    const survey = await surveyFile(input, format, resource, { delimiter: order.delimiter });
    if (survey.unknown.length > 0 && !order.ignoreUnknownColumns) throw unknownFieldsError(order.file.name, resource, survey.unknown, format);
    total = survey.records;
    const ignored = survey.unknown.map(({ name }) => shown(name));
    post({ type: "surveyed", records: survey.records, ignored });

    const rows = new RejectedRows(format, survey.csv);
    const rejected = new RejectedBlob();
    const rejections: ShownRejection[] = [];
    const { runId } = order.run;
    const entries = new Map(order.run.entries.map((entry) => [entry.chunk, entry]));
    let lastProgress = 0;
    const progress = (force = false) => {
      if (!force && performance.now() - lastProgress < progressEveryMs) return;
      lastProgress = performance.now();
      post({ type: "progress", counts: counts() });
    };
    for (let chunkBytes = order.run.chunkBytes; ; ) {
      bytesRead = 0;
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
          record: (entry) => post({ type: "queued", chunkBytes, entry }),
        },
        jobsInFlight,
        onRejections: (chunk: Rejection[]) => {
          for (const { source, reason, text } of chunk) {
            rejected.add(rows.add(source, reason, text));
            if (rejections.length < rejectionsShown) rejections.push({ where: where(source), reason: shownReason(reason), record: recordText(source.cells, source.raw, text) });
          }
        },
        onBytes: (bytes) => {
          bytesRead += bytes;
          progress();
        },
        onProgress: (_job, done) => progress(done),
      });
      try {
        await importing.run();
        break;
      } catch (error) {
        // A server (or a proxy before it: nginx takes 1 MB by default) that refuses the first request as too large,
        // before anything was queued or rejected: the same import again, in smaller requests. The CLI has
        // --chunk-bytes for this; a person in a browser should not need to know.
        const first = importing.jobIds.length === 0 && entries.size === 0 && rows.count === 0;
        if (!(error instanceof ImportdProblem && error.status === 413 && first && chunkBytes > smallestChunkBytes)) throw error;
        chunkBytes = Math.max(smallestChunkBytes, Math.floor(chunkBytes / 4));
      }
    }
    const name = rejectedFileName(order.file.name, { tag: order.dryRun ? ".dry-run" : "" });
    post({
      type: "done",
      counts: counts(),
      jobs: importing.jobs.map(({ id, importJobStatus }) => ({ id, importJobStatus })),
      ignored,
      rejections,
      rejectedFile: rows.count > 0 ? { blob: rejected.end(rows.end(), format), name } : undefined,
    });
  } catch (error) {
    // Kept to resume when the same request may succeed later, or when jobs were queued: forgetting them would send
    // their records again. A problem of the file stops the same import again: said, and then it can be forgotten.
    const queued = (importing?.jobIds.length ?? 0) + order.run.entries.length;
    const resumable = !order.dryRun && !(error instanceof SourceError) && (isTransient(error) || queued > 0);
    const said =
      error instanceof SourceError
        ? inConsoleWords(error)
        : error instanceof ImportdProblem || error instanceof ImportdConnectionError
          ? problemText(error, order.environment)
          : String((error as Error)?.message ?? error);
    post({
      type: "failed",
      message:
        said +
        (order.dryRun ? "" : queued > 0 ? " Jobs of this import had been queued: importd applies them whatever happens here." : " Nothing of this import was queued.") +
        (resumable ? ` ${isTransient(error) ? "Once importd answers" : "Once that is put right"}, press "Resume the import": what was queued is not sent again.` : ""),
      resumable,
    });
  }
}

/** A File's stream as an async iterable of byte chunks: not every browser's ReadableStream is one (Safari's is not). */
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
  private pendingChars = 0;

  add(text: string): void {
    this.pending.push(text);
    this.pendingChars += text.length;
    if (this.pendingChars > 1_000_000) this.flush();
  }

  end(text: string, format: string): Blob {
    this.pending.push(text);
    this.flush();
    return new Blob([this.blob], { type: format === "csv" ? "text/csv;charset=utf-8" : format === "json" ? "application/json" : "application/x-ndjson" });
  }

  private flush(): void {
    this.blob = new Blob([this.blob, ...this.pending]);
    this.pending = [];
    this.pendingChars = 0;
  }
}

/**
 * A rejected record as the page shows it: a CSV row's cells, or the JSON as it was. An empty cell shows as "–", as
 * the console shows nothing everywhere: it stays visible (the cells keep their places), and no "|" dangles at the end. The space before each "|" does not
 * break, so that a wrapped line ends with the separator instead of starting with it.
 */
function recordText(cells: string[] | undefined, raw: string | undefined, text: string | undefined): string {
  const full = cells ? cells.map((cell) => (cell === "" ? "–" : cell)).join("\u00a0| ") : (raw ?? text ?? "");
  return full.length > 300 ? `${full.slice(0, 300)}…` : full;
}
