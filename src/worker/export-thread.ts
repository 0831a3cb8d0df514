/// <reference lib="webworker" />
// The thread exports are read in (DECISIONS 14; worker/exports.ts starts it at the first export and keeps it). Each
// export's snapshot is read and written out as text here, a slice at a time, and handed over as bytes: on the HTTP
// thread, each slice (1,000 assets, a few milliseconds) held every request that arrived meanwhile, and status polls
// waited behind exports (bench row e2). Exports run side by side; each one's asks are answered one at a time, in order.
import { recordEncoding, type ExportFormat, type RecordEncoding } from "../resources/record-export";
import { resourceByPath } from "../resources/registry";
import { StorageError, type StorageFaultKind } from "../store/errors";
import { openSnapshot } from "../store/open";
import type { RecordSnapshot, StoreHandle } from "../store/ports";

declare const self: Worker;

export type ExportAsk = { exportId: number } & (
  | { type: "open"; store: StoreHandle; resource: string; environmentId: number; updatedSince?: string; format: ExportFormat; recordsPerSlice: number; endThreadAfterChunks?: number }
  | { type: "next" }
  | { type: "close" }
);

/** What the thread answers each ask with: "chunk" or "end" to a next; "failed" to any. */
export type ExportAnswer = { exportId: number } & (
  | { type: "opened" }
  | { type: "chunk"; bytes: Uint8Array }
  | { type: "end" }
  | { type: "closed" }
  | { type: "failed"; message: string; kind?: StorageFaultKind; stack?: string }
);

type Reading = { snapshot: RecordSnapshot; encoding: RecordEncoding; recordsPerSlice: number; headSent: boolean; endThreadAfterChunks?: number };

const encoder = new TextEncoder();
const readings = new Map<number, Reading>();
/** Each export's last ask, which its next waits for. */
const turns = new Map<number, Promise<void>>();

async function answerTo(ask: ExportAsk): Promise<ExportAnswer> {
  const { exportId } = ask;
  if (ask.type === "open") {
    const resource = resourceByPath(ask.resource);
    if (!resource) throw new Error(`unknown resource ${ask.resource}`);
    const snapshot = await openSnapshot(ask.store, resource, ask.environmentId, { updatedSince: ask.updatedSince });
    readings.set(exportId, { snapshot, encoding: recordEncoding(resource, ask.format), recordsPerSlice: ask.recordsPerSlice, headSent: false, endThreadAfterChunks: ask.endThreadAfterChunks });
    return { exportId, type: "opened" };
  }
  const reading = readings.get(exportId);
  if (ask.type === "close") {
    readings.delete(exportId);
    await reading?.snapshot.close();
    return { exportId, type: "closed" };
  }
  if (!reading) throw new Error(`export ${exportId} is not open`);
  // Tests' hook (exportThreadEndsAfterChunks): the thread is lost mid-export, as a crash would lose it.
  if (reading.endThreadAfterChunks !== undefined && reading.endThreadAfterChunks-- === 0) process.exit(1);
  const head = reading.headSent ? "" : reading.encoding.head;
  reading.headSent = true;
  // Slices that updatedSince left empty are skipped: a chunk always holds something, unless the export is empty.
  for (;;) {
    const records = await reading.snapshot.next(reading.recordsPerSlice);
    if (records === undefined) return head === "" ? { exportId, type: "end" } : { exportId, type: "chunk", bytes: encoder.encode(head) };
    if (records.length > 0) return { exportId, type: "chunk", bytes: encoder.encode(head + reading.encoding.encode(records)) };
  }
}

self.onmessage = (event: MessageEvent<ExportAsk>) => {
  const ask = event.data;
  const turn = (turns.get(ask.exportId) ?? Promise.resolve()).then(async () => {
    let answer: ExportAnswer;
    try {
      answer = await answerTo(ask);
    } catch (error) {
      answer = { exportId: ask.exportId, type: "failed", message: (error as Error)?.message ?? String(error), kind: error instanceof StorageError ? error.kind : undefined, stack: (error as Error)?.stack };
    }
    if (answer.type === "chunk") self.postMessage(answer, [answer.bytes.buffer]);
    else self.postMessage(answer);
    if (ask.type === "close" && turns.get(ask.exportId) === turn) turns.delete(ask.exportId);
  });
  turns.set(ask.exportId, turn);
};
