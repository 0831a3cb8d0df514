import type { ValidBatch } from "../jobs/batch";

/**
 * The batches this worker thread accepted and has not applied yet, parsed and validated, so that applying
 * one it accepted itself does not parse and validate the same bytes again (what that saves: docs/performance.md,
 * "Parse once"). Bounded by the size of the bodies they came from: past `maxBytes` the
 * oldest are dropped, and their jobs are parsed from the stored payload as after a restart. The newest is
 * always kept, however big.
 */
export class ParsedBatches {
  private readonly batches = new Map<number, { batch: ValidBatch; bytes: number }>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  add(jobId: number, batch: ValidBatch, bytes: number): void {
    this.batches.set(jobId, { batch, bytes });
    this.bytes += bytes;
    for (const [oldest, batch] of this.batches) {
      if (this.bytes <= this.maxBytes || oldest === jobId) break;
      this.batches.delete(oldest);
      this.bytes -= batch.bytes;
    }
  }

  /** The job's batch, handed over once: the cache lets go of it. */
  take(jobId: number): ValidBatch | undefined {
    const entry = this.batches.get(jobId);
    if (!entry) return undefined;
    this.batches.delete(jobId);
    this.bytes -= entry.bytes;
    return entry.batch;
  }
}
