/**
 * Pings an environment may send (POST /v2/webhooks/{id}/test) per minute. A ping is a request importd makes at a key
 * holder's word, at once and outside the dispatcher's fair share of slots: a few a minute check a receiver, more
 * would make importd a tool for probing what the operator allowed (DECISIONS 15).
 */
export const pingsPerMinute = 5;

/**
 * The pings of each environment in the last minute, in this process (a hint, as the failed-key limit is: several
 * instances on one database each allow as many). Each environment keeps at most `limit` times.
 */
export class PingLimit {
  private readonly sent = new Map<number, number[]>();

  constructor(
    private readonly limit = pingsPerMinute,
    private readonly windowMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Counts a ping of the environment and answers undefined, or answers in how many seconds it may ping again (and counts nothing). */
  take(environmentId: number): number | undefined {
    const now = this.now();
    const recent = (this.sent.get(environmentId) ?? []).filter((at) => at > now - this.windowMs);
    if (recent.length >= this.limit) {
      this.sent.set(environmentId, recent);
      return Math.max(1, Math.ceil((recent[0]! + this.windowMs - now) / 1000));
    }
    recent.push(now);
    this.sent.set(environmentId, recent);
    return undefined;
  }
}
