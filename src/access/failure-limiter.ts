/**
 * Slows down guessing: counts failed authentications per client address over a sliding minute. Once a
 * client has failed `perMinute` times, it is refused (429) until its oldest failure leaves the window,
 * whatever key it sends then; a correct guess would otherwise still get through.
 */
export class FailureLimiter {
  private readonly failures = new Map<string, number[]>();

  constructor(
    private readonly perMinute: number,
    private readonly now: () => number = Date.now,
    // Bounds memory under a flood from many addresses: past this, the longest-quiet client is forgotten.
    private readonly maxClients = 10_000,
  ) {}

  /** No client has failed within the last minute (or ever): nobody needs to be looked up. */
  get empty(): boolean {
    return this.failures.size === 0;
  }

  /** Seconds the client must wait before its next attempt, or undefined when it may try now. */
  retryAfter(client: string): number | undefined {
    if (this.perMinute === 0) return undefined;
    const recent = this.recent(client);
    if (recent.length < this.perMinute) return undefined;
    return Math.max(1, Math.ceil((recent[recent.length - this.perMinute]! + windowMs - this.now()) / 1000));
  }

  recordFailure(client: string): void {
    if (this.perMinute === 0) return;
    const recent = this.recent(client);
    recent.push(this.now());
    // Only the newest `perMinute` failures matter for the wait.
    if (recent.length > this.perMinute) recent.splice(0, recent.length - this.perMinute);
    this.failures.delete(client);
    this.failures.set(client, recent);
    if (this.failures.size > this.maxClients) this.failures.delete(this.failures.keys().next().value!);
  }

  private recent(client: string): number[] {
    const since = this.now() - windowMs;
    const recent = (this.failures.get(client) ?? []).filter((time) => time > since);
    if (recent.length === 0) this.failures.delete(client);
    return recent;
  }
}

const windowMs = 60_000;
