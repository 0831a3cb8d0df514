import { createClient, ImportdConnectionError, ImportdProblem, isTransient, type ImportdClient, type JobDocument, type Resource } from "../../client";
import { ChunkedImport, type Rejection } from "../../importer/chunked-import";
import { runCompletion, stoppedByLimit, unknownToSync } from "../../importer/mirror";
import { shown } from "../../importer/fields";
import { rejectedFileName, RejectedRows } from "../../importer/rejected-rows";
import { formatOf, SourceError, where } from "../../importer/source";
import { surveyFile, unknownFieldsError } from "../../importer/survey";
import type { InputFile } from "../../importer/text";
import { resourceByPath } from "../../resources/registry";
import { problemText } from "../problems";
import { shownReason } from "../reasons";
import { inConsoleWords } from "./words";
import type { Counts, FromWorker, ImportOrder, MirrorEnd, ShownRejection } from "./protocol";

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
    const client = createClient({ baseUrl: order.baseUrl, apiKey: order.apiKey });
    // A mirror sends its chunks in a sync: being applied, the interrupted run's, if this resumes one and it is open; a
    // dry run's go, as dry runs, in a sync of their own, which its dry-run completion counts from (it then expires unused).
    const sync = !order.mirror ? undefined : order.dryRun ? (await client.openSync(order.resource as Resource)).id : await mirrorSync(client, order, post);
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
        client,
        mode: order.dryRun ? "dry-run" : "import",
        chunkBytes,
        sync,
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
    const notSent = unknownToSync(importing.totals);
    const mirror = sync === undefined ? undefined : order.dryRun ? await forecastMirror(client, sync, notSent) : await completeMirror(client, sync, order, notSent);
    post({
      type: "done",
      counts: counts(),
      jobs: importing.jobs.map(({ id, importJobStatus }) => ({ id, importJobStatus })),
      ignored,
      rejections,
      rejectedFile: rows.count > 0 ? { blob: rejected.end(rows.end(), format), name } : undefined,
      mirror,
    });
  } catch (error) {
    // Kept to resume when the same request may succeed later, or when jobs were queued: forgetting them would send
    // their records again. A problem of the file stops the same import again: said, and then it can be forgotten.
    const queued = (importing?.jobIds.length ?? 0) + order.run.entries.length;
    const resumable = !order.dryRun && !(error instanceof SourceError) && !(error instanceof SyncEnded) && (isTransient(error) || queued > 0);
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
        (order.dryRun || error instanceof SyncEnded ? "" : queued > 0 ? " Jobs of this import had been queued: importd applies them whatever happens here." : " Nothing of this import was queued.") +
        (resumable ? ` ${isTransient(error) ? "Once importd answers" : "Once that is put right"}, press "Resume the import": what was queued is not sent again.` : ""),
      resumable,
    });
  }
}

/** The sync a mirror's chunks go in: the one the interrupted run opened, if still open, or a new one, said to the page. */
async function mirrorSync(client: ImportdClient, order: ImportOrder, post: (message: FromWorker) => void): Promise<number> {
  const earlier = order.run.sync;
  if (earlier === undefined) {
    const sync = await client.openSync(order.resource as Resource);
    post({ type: "sync", sync: sync.id });
    return sync.id;
  }
  const sync = await client.getSync(earlier).catch((error) => {
    if (error instanceof ImportdProblem && error.status === 404) return undefined;
    throw error;
  });
  if (sync?.state === "open") return sync.id;
  // Not a SourceError, but nothing to resume either: said, and the import is then forgotten.
  throw new SyncEnded(
    `The interrupted mirror's sync ${earlier} ${!sync ? "no longer exists" : sync.state === "expired" ? `expired at ${new Date(sync.expiresAt).toLocaleString("en-GB")} (a sync must be completed within 24 hours), and nothing was deleted` : `was completed meanwhile, by job ${sync.completedByJobId}`}. ` +
      "Check the file again with a dry run, then apply it: a new sync is opened and the whole file sent in it.",
  );
}

/** A mirror's sync that ended while its import was interrupted: it cannot be resumed. */
class SyncEnded extends Error {}

/** Why a mirror is not completed: a record no job took is one the sync does not know the file has. */
const notSentWords = (notSent: number) =>
  `${notSent === 1 ? "1 record of the file was" : `${notSent} records of the file were`} refused before any job took ${notSent === 1 ? "it" : "them"}, ` +
  `so importd does not know the file has ${notSent === 1 ? "it" : "them"} and completing the mirror would delete ${notSent === 1 ? "it" : "them"}. ` +
  "Fix the file itself (a mirror of the rejected records alone would delete every other record), check it again and apply it";

/**
 * Completes a mirror's sync, within the count its dry run showed (maxDelete), and waits for it; unless a record was
 * refused before any job took it: the sync would not know the file has it, and the completion would delete it.
 */
async function completeMirror(client: ImportdClient, sync: number, order: ImportOrder, notSent: number): Promise<MirrorEnd> {
  if (notSent > 0) return { dryRun: false, sync, deleted: 0, rejected: 0, message: `Nothing was deleted: ${notSentWords(notSent)}: a new sync is opened.` };
  const done = await runCompletion(client, sync, order.run.maxDelete === undefined ? {} : { maxDelete: order.run.maxDelete });
  return { dryRun: false, sync, job: jobRef(done), deleted: done.output?.deleted ?? 0, rejected: done.output?.rejected ?? 0, message: done.output?.message ?? "" };
}

/**
 * A mirror's dry run: its sync completed as a dry run, as importd import --mirror --dry-run does, so that the server
 * counts exactly what applying would delete (references and other jobs' writes included). Within importd's default
 * limit, or stopped by it: then its words are kept and a second dry run, allowing what it would have deleted, counts,
 * since applying allows what the person saw.
 */
async function forecastMirror(client: ImportdClient, sync: number, notSent: number): Promise<MirrorEnd> {
  if (notSent > 0) return { dryRun: true, sync, considered: 0, rejected: 0, message: `The mirror cannot be applied as it is: ${notSentWords(notSent)}.` };
  const first = await runCompletion(client, sync, { dryRun: true });
  const over = stoppedByLimit(first);
  const done = over ? await runCompletion(client, sync, { dryRun: true, maxDelete: over.unsent }) : first;
  const output = done.output!;
  // A completion that rejected every record it considered (all referred to) counted too: it would delete none.
  const counted = done.importJobStatus !== "Failed" || (output.rejected > 0 && output.rejected === output.total);
  return {
    dryRun: true,
    sync,
    job: jobRef(done),
    wouldDelete: counted ? (output.deleted ?? 0) : undefined,
    considered: output.total,
    rejected: output.rejected,
    message: serverWords(output.message),
    overLimit: over && serverWords(first.output!.message),
  };
}

/**
 * The server's words on a dry-run completion without what the page says its own way: that nothing was applied (the
 * dry run's heading), and the next step in the API's terms (query parameters).
 */
const serverWords = (message: string) =>
  message.replace(/^Dry run: nothing was applied\. (Applying it would fail: )?/, "").replace(/ (The sync stays open: complete it without dryRun to delete them|If that is right, complete the sync again with .*)\.$/, "");

const jobRef = ({ id, importJobStatus }: JobDocument) => ({ id, importJobStatus });

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
