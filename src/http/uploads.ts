import { bodyTimeout, environmentBusy, serverBusy } from "./problem";

/**
 * Request bodies in flight (DECISIONS 15): what one environment's key holder can make the server hold in memory.
 *
 * - A server-wide budget of body bytes buffered at once. A body with a declared length reserves that length before
 *   a byte of it is read; a chunked body reserves its buffer as the buffer grows (readBody doubles it), so it is
 *   cut off when the budget runs out rather than held to the hard limit from the start. What does not fit is a 503:
 *   the server is busy, not the client at fault.
 * - An environment has at most `perEnvironment` bodies over `smallBodyBytes` in flight, and at most half the budget
 *   (but always room for one body at the hard limit): a 429, as bulk APIs answer a client over its concurrency limit
 *   (Stripe's, say). The half leaves every other environment the other half, whatever one of them holds. Small
 *   bodies are not counted: twenty clients of one environment sending one-record jobs at once (bench row 7) are
 *   not an attack, and what thousands of small bodies can hold is bounded by the share and the stall time.
 * - A reservation lasts until the route is done with the body: read, handed to a worker thread, parsed and stored
 *   (the buffer lives on in the worker until then), or refused on any path (413, 400, 408, client gone).
 *
 * All of it is counting in this thread; nothing here runs per chunk.
 */
export type UploadLimits = {
  budgetBytes: number;
  perEnvironment: number;
  /** One body at the hard limit must always fit an environment's share. */
  maxBodyBytes: number;
  /** No byte for this long is a 408; also the grace before the minimum rate applies. */
  stallSeconds: number;
  /** After the grace, a body whose average rate falls below this is a 408 (0: no minimum). */
  minBytesPerSecond: number;
};

/** Bodies up to this size (an import's light lane, a webhook subscription) are not counted among an environment's. */
export const smallBodyBytes = 64 * 1024;

type Holder = { count: number; bytes: number; bodies: number };

export class UploadGate {
  private bufferedBytes = 0;
  private readonly environments = new Map<number, Holder>();
  readonly environmentShareBytes: number;

  constructor(readonly limits: UploadLimits) {
    this.environmentShareBytes = Math.max(Math.floor(limits.budgetBytes / 2), Math.min(limits.maxBodyBytes, limits.budgetBytes));
  }

  /** Bodies in flight now, and the bytes reserved for them (for the tests, and a gauge some day). */
  inFlight(): { count: number; bytes: number } {
    let count = 0;
    for (const holder of this.environments.values()) count += holder.bodies;
    return { count, bytes: this.bufferedBytes };
  }

  /** An upload of `environmentId` about to read its body; nothing is counted until its first reserve. */
  begin(environmentId: number): Upload {
    return new Upload(this, environmentId);
  }

  /** @internal Upload's: `counted` when this reservation makes the body one of the environment's counted ones. */
  take(environmentId: number, bytes: number, first: boolean, counted: boolean): void {
    const holder = this.environments.get(environmentId) ?? { count: 0, bytes: 0, bodies: 0 };
    if (counted && holder.count >= this.limits.perEnvironment) {
      throw environmentBusy(`This environment already has ${holder.count} request bodies in flight, the most it may have at once. Send this one again when one of them has been answered.`);
    }
    if (holder.bytes + bytes > this.environmentShareBytes) {
      throw environmentBusy(`This environment's request bodies in flight would pass ${this.environmentShareBytes} bytes, its share of the server's memory for them. Send this one again when one of them has been answered, or send smaller requests.`);
    }
    if (this.bufferedBytes + bytes > this.limits.budgetBytes) {
      throw serverBusy("The server is holding as many request bodies in memory as it may just now; nothing of this one was read or accepted. Send it again after Retry-After seconds.");
    }
    if (counted) holder.count++;
    if (first) holder.bodies++;
    holder.bytes += bytes;
    this.bufferedBytes += bytes;
    this.environments.set(environmentId, holder);
  }

  /** @internal Upload's. */
  give(environmentId: number, bytes: number, counted: boolean): void {
    const holder = this.environments.get(environmentId);
    if (!holder) return;
    holder.bytes -= bytes;
    this.bufferedBytes -= bytes;
    if (counted) holder.count--;
    holder.bodies--;
    if (holder.bodies === 0) this.environments.delete(environmentId);
  }
}

/** One request's body: its reservation, grown as readBody needs, released once by `end`. */
export class Upload {
  private reserved = 0;
  private counted = false;
  private ended = false;

  constructor(
    private readonly gate: UploadGate,
    private readonly environmentId: number,
  ) {}

  get limits(): UploadLimits {
    return this.gate.limits;
  }

  /** Makes the reservation `totalBytes` in all (no smaller); a 429 or 503 Problem when it does not fit. */
  reserve(totalBytes: number): void {
    if (this.ended || totalBytes <= this.reserved) return;
    const counted = !this.counted && totalBytes > smallBodyBytes;
    this.gate.take(this.environmentId, totalBytes - this.reserved, this.reserved === 0, counted);
    this.counted ||= counted;
    this.reserved = totalBytes;
  }

  /** Idempotent: every path out of a route calls it, in a finally. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.reserved > 0) this.gate.give(this.environmentId, this.reserved, this.counted);
    this.reserved = 0;
  }
}

/**
 * Watches a body being read: `progress()` says how many bytes have arrived so far; `cutOff` is called (once) when
 * none arrived for the stall time, or, after that same time as a grace, when the average rate is under the minimum.
 * The check runs on a timer, a few times per stall time, so that reading a chunk costs nothing more.
 */
export function watchBody(limits: Pick<UploadLimits, "stallSeconds" | "minBytesPerSecond">, progress: () => number, cutOff: (problem: ReturnType<typeof bodyTimeout>) => void): () => void {
  const stallMs = limits.stallSeconds * 1000;
  const startedAt = Date.now();
  let lastBytes = 0;
  let lastProgressAt = startedAt;
  const timer = setInterval(
    () => {
      const now = Date.now();
      const bytes = progress();
      if (bytes !== lastBytes) {
        lastBytes = bytes;
        lastProgressAt = now;
      }
      const crawling = limits.minBytesPerSecond > 0 && now - startedAt > stallMs && bytes < (limits.minBytesPerSecond * (now - startedAt - stallMs)) / 1000;
      if (now - lastProgressAt >= stallMs || crawling) {
        clearInterval(timer);
        cutOff(bodyTimeout(limits, now - lastProgressAt >= stallMs ? "stalled" : "crawling"));
      }
    },
    Math.min(1000, Math.max(50, stallMs / 4)),
  );
  return () => clearInterval(timer);
}
