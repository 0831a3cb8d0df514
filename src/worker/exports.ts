// Exports (DECISIONS 14), read in a thread of their own (export-thread.ts), so that the HTTP thread only passes bytes
// on. One thread for all of them, started at the first export and kept: a new thread took 80 to 300 ms to start, and
// its code ran cold (the first 100k-asset export took twice as long as the next ones in a kept thread). The exports
// at a time are few (http/routes/exports.ts caps them), and on one thread they take at most one core from the imports.
import type { ResourceDefinition } from "../resources/definition";
import type { ExportFormat } from "../resources/record-export";
import { storageFault } from "../store/errors";
import type { SnapshotOptions, StoreHandle } from "../store/ports";
import type { ExportAnswer, ExportAsk } from "./export-thread";

/** Records read per slice: what the thread encodes into one chunk (1,000 assets are about 600 KB of NDJSON). */
const recordsPerSlice = 1_000;

/** A close the thread does not answer in this long (its store unreachable, say) is not waited for further. */
const closeWaitMs = 5_000;

/** One export's file, a chunk at a time. */
export interface RecordExport {
  /** The next chunk of the file (the CSV header comes with the first), or undefined once it is whole. */
  next(): Promise<Uint8Array | undefined>;
  /** Ends the snapshot; once, however often asked. */
  close(): Promise<void>;
}

type Waiting = { resolve: (answer: ExportAnswer) => void; reject: (error: Error) => void };

export class RecordExports {
  private thread: ExportThread | undefined;
  private nextExportId = 1;

  /**
   * `entry`: the thread's module (an extra entrypoint of the compiled binary); `store`: the store to read;
   * `endThreadAfterChunks`: tests' hook, the thread ends after that many chunks of an export.
   */
  constructor(private readonly options: { entry: URL; store: StoreHandle; endThreadAfterChunks?: number }) {}

  /** Opens the export's snapshot: now, so that it holds what was committed when the request arrived. */
  async open(resource: ResourceDefinition, environmentId: number, { updatedSince, format }: SnapshotOptions & { format: ExportFormat }): Promise<RecordExport> {
    // A thread that was lost (it crashed) is replaced; the exports it was reading were cut short.
    if (!this.thread || this.thread.lost) this.thread = new ExportThread(this.options.entry);
    const thread = this.thread;
    const exportId = this.nextExportId++;
    await thread.openExport({ exportId, type: "open", store: this.options.store, resource: resource.path, environmentId, updatedSince, format, recordsPerSlice, endThreadAfterChunks: this.options.endThreadAfterChunks });
    let closed: Promise<void> | undefined;
    return {
      next: async () => {
        const answer = await thread.ask({ exportId, type: "next" });
        return answer.type === "chunk" ? answer.bytes : undefined;
      },
      close: () => (closed ??= thread.closeExport(exportId)),
    };
  }

  /** At the server's stop: ends every export's snapshot, then the thread. */
  async close(): Promise<void> {
    await this.thread?.end();
    this.thread = undefined;
  }
}

class ExportThread {
  private readonly worker: Worker;
  // Each export's asks, answered in the order they were asked.
  private readonly waiting = new Map<number, Waiting[]>();
  private readonly open = new Set<number>();
  lost: Error | undefined;

  constructor(entry: URL) {
    this.worker = new Worker(entry);
    this.worker.onmessage = (event: MessageEvent<ExportAnswer>) => {
      const queue = this.waiting.get(event.data.exportId);
      queue?.shift()?.resolve(event.data);
      if (queue?.length === 0) this.waiting.delete(event.data.exportId);
    };
    this.worker.onerror = (event) => {
      event.preventDefault?.();
      this.lose(new Error(`the exports' thread failed: ${event.message ?? "an error"}`));
    };
    this.worker.addEventListener("close", () => this.lose(new Error("the exports' thread ended")));
  }

  async ask(ask: ExportAsk): Promise<ExportAnswer> {
    if (this.lost) throw this.lost;
    const answer = await new Promise<ExportAnswer>((resolve, reject) => {
      const queue = this.waiting.get(ask.exportId) ?? [];
      queue.push({ resolve, reject });
      this.waiting.set(ask.exportId, queue);
      this.worker.postMessage(ask);
    });
    if (answer.type !== "failed") return answer;
    const error = answer.kind ? storageFault(answer.kind, answer.message) : new Error(answer.message);
    if (answer.stack) error.stack = answer.stack;
    throw error;
  }

  async openExport(ask: ExportAsk & { type: "open" }): Promise<void> {
    await this.ask(ask);
    this.open.add(ask.exportId);
  }

  /** Closes one export's snapshot; a failure to is not the client's problem (the thread drops it either way). */
  async closeExport(exportId: number): Promise<void> {
    this.open.delete(exportId);
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([this.ask({ exportId, type: "close" }), new Promise((resolve) => (timer = setTimeout(resolve, closeWaitMs)))]);
    } catch {
      // Lost, or its snapshot would not close: a lost thread took its connections with it.
    } finally {
      clearTimeout(timer);
    }
  }

  /** Closes the snapshots still open, then ends the thread. */
  async end(): Promise<void> {
    await Promise.all([...this.open].map((exportId) => this.closeExport(exportId)));
    this.worker.terminate();
  }

  private lose(error: Error): void {
    this.lost ??= error;
    this.worker.terminate();
    for (const queue of this.waiting.values()) for (const waiting of queue) waiting.reject(this.lost);
    this.waiting.clear();
  }
}
