/**
 * Slows down guessing: counts failed authentications per client address over a sliding minute. Once a
 * client has failed `perMinute` times, it is refused (429) until its oldest counted failure leaves the
 * window, whatever key it sends then; a correct guess would otherwise still get through.
 *
 * The failures are kept in a FailureLog: this process's memory when it alone serves the store (SQLite), the
 * database when several instances share it (PostgreSQL), so that the limit holds across them.
 */
export interface FailureLog {
  /** No failure within the last minute anywhere: nobody needs to be looked up (a hint; false when unsure). */
  readonly empty: boolean;
  /** The times (ms since the epoch) of the client's newest failures after `since`, at most `limit`, oldest first. */
  recent(client: string, since: number, limit: number): Promise<number[]>;
  add(client: string, at: number): Promise<void>;
}

export const failureWindowMs = 60_000;

export class FailureLimiter {
  constructor(
    private readonly perMinute: number,
    private readonly log: FailureLog,
    private readonly now: () => number = Date.now,
  ) {}

  /** No client can be refused now (no failure counted lately, or no limit): nobody needs to be looked up. */
  get quiet(): boolean {
    return this.perMinute === 0 || this.log.empty;
  }

  /** Seconds the client must wait before its next attempt, or undefined when it may try now. */
  async retryAfter(client: string): Promise<number | undefined> {
    if (this.quiet) return undefined;
    const now = this.now();
    const recent = await this.log.recent(client, now - failureWindowMs, this.perMinute);
    if (recent.length < this.perMinute) return undefined;
    return Math.max(1, Math.ceil((recent[0]! + failureWindowMs - now) / 1000));
  }

  async recordFailure(client: string): Promise<void> {
    if (this.perMinute === 0) return;
    await this.log.add(client, this.now());
  }
}

/** Failures in this process's memory. Bounded: past `maxClients` addresses, the longest quiet is forgotten. */
export class MemoryFailureLog implements FailureLog {
  private readonly failures = new Map<string, number[]>();

  constructor(
    private readonly maxClients = 10_000,
    // Only the newest this many failures of a client are kept (the limit never needs more).
    private readonly keepPerClient = 1_000,
  ) {}

  get empty(): boolean {
    return this.failures.size === 0;
  }

  async recent(client: string, since: number, limit: number): Promise<number[]> {
    const recent = (this.failures.get(client) ?? []).filter((time) => time > since);
    if (recent.length === 0) this.failures.delete(client);
    else this.failures.set(client, recent);
    return recent.slice(-limit);
  }

  async add(client: string, at: number): Promise<void> {
    const times = this.failures.get(client) ?? [];
    times.push(at);
    if (times.length > this.keepPerClient) times.splice(0, times.length - this.keepPerClient);
    this.failures.delete(client);
    this.failures.set(client, times);
    if (this.failures.size > this.maxClients) this.failures.delete(this.failures.keys().next().value!);
  }
}
