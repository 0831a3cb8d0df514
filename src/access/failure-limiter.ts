import { addressesIn } from "../net/cidr";
import { ipv4In, ipv6Groups } from "../net/ipv6";
import { failureWindowMs, type FailureLog } from "../store/ports";

// An IPv4 client written as IPv6: by a dual-stack socket (::ffff:a.b.c.d), or by a translator that gives IPv4
// clients to an IPv6-only server in the well-known NAT64 prefix (64:ff9b::a.b.c.d).
const writtenAsIPv6 = addressesIn(["::ffff:0:0/96", "64:ff9b::/96"]);

/**
 * Whom a failure is counted against, from the client's address: an IPv4 address as it is, an IPv4 address written
 * as IPv6 as that IPv4 address, and an IPv6 address by its /64. A /64 is the least one subscriber or site is given
 * (RFC 6177), and inside it a client picks addresses at will (privacy addresses, or any of 2^64 on a host that
 * answers them all): counted per address, it would never be limited. Anything else (`unknown`) as it is.
 */
export function failureKey(client: string): string {
  const groups = ipv6Groups(client);
  if (groups === undefined) return client;
  if (writtenAsIPv6(client)) return ipv4In(groups[6]!, groups[7]!);
  return `${groups.slice(0, 4).map((group) => group.toString(16)).join(":")}::/64`;
}

/**
 * Slows down guessing: counts failed authentications per client (see failureKey) over a sliding minute
 * (failureWindowMs). Once a client has failed `perMinute` times, it is refused (429) until its oldest counted failure
 * leaves the window, whatever key it sends then; a correct guess would otherwise still get through.
 *
 * The failures are kept in a FailureLog (store/ports.ts), under each client's failureKey: this process's memory when
 * it alone serves the store (SQLite), the database when several instances share it (PostgreSQL), so that the limit
 * holds across them.
 */
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

  /** Seconds the client (its address) must wait before its next attempt, or undefined when it may try now. */
  async retryAfter(client: string): Promise<number | undefined> {
    if (this.quiet) return undefined;
    const now = this.now();
    const recent = await this.log.recent(failureKey(client), now - failureWindowMs, this.perMinute);
    if (recent.length < this.perMinute) return undefined;
    return Math.max(1, Math.ceil((recent[0]! + failureWindowMs - now) / 1000));
  }

  async recordFailure(client: string): Promise<void> {
    if (this.perMinute === 0) return;
    await this.log.add(failureKey(client), this.now());
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
