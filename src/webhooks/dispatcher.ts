import type { Log } from "../log";
import type { AllowList } from "../net/allow-list";
import type { ClaimedDelivery, DeliveryOutcome, WebhookStore } from "../store/ports";
import { nextAttemptAt } from "./retries";
import { sendWebhook, type Attempt } from "./send";

// The least time between two looks at the outbox.
const minLookIntervalMs = 20;

/**
 * Deliveries in flight at once for one environment (over all processes on PostgreSQL): its receivers that hang hold
 * this many slots at most, so the other environments' deliveries go on (DECISIONS 15). Four lets a tenant with a few
 * subscriptions deliver to them all at once, and leaves most of the 16 slots to the others.
 */
export const maxInFlightPerEnvironment = 4;

export type DispatcherOptions = {
  store: WebhookStore;
  allow: AllowList;
  log: Log;
  /** Deliveries in flight at once, over all subscriptions (one per subscription at a time). */
  maxInFlight?: number;
  /** Deliveries in flight at once for one environment (tests; maxInFlightPerEnvironment otherwise). */
  maxInFlightPerEnvironment?: number;
  /**
   * How long a claim keeps other processes off a delivery: twice an attempt's 10 s, to store its outcome in. It is also
   * how long a delivery claimed by an instance that was killed waits before another takes it over (PostgreSQL).
   */
  leaseMs?: number;
  /** The longest sleep between looks at the outbox, when nothing wakes it sooner. */
  idleMs?: number;
  /** Shrinks the retry schedule (tests only; see Config.testHooks). */
  retryScale?: number;
  /** Extra certificates to trust (tests only). */
  ca?: string;
};

/**
 * Sends the outbox's deliveries, in this process, beside the queue: HTTP happens here and never inside a run's
 * transaction, so a slow or dead receiver slows only its own deliveries. It claims the due deliveries (one per
 * subscription at a time, so that a receiver that hangs holds one slot, not all; at most a few per environment, the
 * environments taking turns, so that one tenant's receivers cannot hold the slots), sends each (send.ts), and stores
 * the attempt and what comes next: delivered, retried later (retries.ts), or given up; a 410 disables the
 * subscription. Woken when jobs end (here or, on PostgreSQL, anywhere); otherwise it looks again when the next
 * delivery is due, at most `idleMs` later.
 */
export class WebhookDispatcher {
  private readonly inFlight = new Map<number, { webhookId: number; done: Promise<void> }>();
  private readonly maxInFlight: number;
  private readonly perEnvironment: number;
  private readonly leaseMs: number;
  private readonly idleMs: number;
  private wakeUp: (() => void) | undefined;
  private woken = false;
  private stopped = false;
  private loop: Promise<void> | undefined;

  constructor(private readonly options: DispatcherOptions) {
    this.maxInFlight = options.maxInFlight ?? 16;
    this.perEnvironment = options.maxInFlightPerEnvironment ?? maxInFlightPerEnvironment;
    this.leaseMs = options.leaseMs ?? 20_000;
    this.idleMs = options.idleMs ?? 2_000;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Something may be due now (a job ended, an attempt finished). */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /** Claims nothing more, and waits for the attempts in flight (each ends within its 10 s) or `deadlineMs`. */
  async stop(deadlineMs = 15_000): Promise<void> {
    this.stopped = true;
    this.wake();
    await Promise.race([Promise.all([this.loop, ...[...this.inFlight.values()].map((flight) => flight.done)]), Bun.sleep(deadlineMs)]);
  }

  private async run(): Promise<void> {
    let lastLook = 0;
    while (!this.stopped) {
      // Jobs end by the hundred a second on a busy server, and each wakes this: one look at the outbox per few
      // milliseconds answers them all.
      await Bun.sleep(Math.max(0, lastLook + minLookIntervalMs - performance.now()));
      lastLook = performance.now();
      this.woken = false;
      let claimed: ClaimedDelivery[] = [];
      try {
        if (this.inFlight.size < this.maxInFlight) {
          claimed = await this.options.store.claimDue({
            token: crypto.randomUUID(),
            limit: this.maxInFlight - this.inFlight.size,
            perEnvironment: this.perEnvironment,
            leaseMs: this.leaseMs,
            busy: [...new Set([...this.inFlight.values()].map((flight) => flight.webhookId))],
          });
        }
        for (const delivery of claimed) this.send(delivery);
        if (claimed.length > 0 && this.inFlight.size < this.maxInFlight) continue;
        await this.sleep(await this.untilNextDue());
      } catch (error) {
        this.options.log({ level: "warn", msg: "webhook deliveries could not be read; trying again", error: String(error) });
        await this.sleep(this.idleMs);
      }
    }
  }

  /**
   * How long nothing can be claimed: until the next delivery is due. One due already but not claimed belongs to a
   * subscription with an attempt in flight (a receiver that hangs, say), or to an environment with its share in
   * flight: then until one of those attempts ends, which wakes this.
   */
  private async untilNextDue(): Promise<number> {
    const due = await this.options.store.nextDueAt();
    if (due === undefined) return this.idleMs;
    const ms = Date.parse(due) - Date.now();
    return ms > 0 ? Math.min(this.idleMs, ms) : this.inFlight.size > 0 ? this.idleMs : minLookIntervalMs;
  }

  private sleep(ms: number): Promise<void> {
    if (this.woken || this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakeUp = () => {
        this.wakeUp = undefined;
        done();
      };
    });
  }

  private send(delivery: ClaimedDelivery): void {
    const done = this.attempt(delivery).finally(() => {
      this.inFlight.delete(delivery.id);
      this.wake();
    });
    this.inFlight.set(delivery.id, { webhookId: delivery.webhookId!, done });
  }

  private async attempt(delivery: ClaimedDelivery): Promise<void> {
    const { log } = this.options;
    const number = delivery.attempts + 1;
    const sent = await sendWebhook({ url: delivery.url, messageId: delivery.messageId, body: delivery.body, secret: delivery.secret, allow: this.options.allow, ca: this.options.ca });
    const outcome = this.outcomeOf(delivery, number, sent);
    try {
      const recorded = await this.options.store.recordAttempt(
        delivery,
        { attempt: number, at: sent.at, status: sent.status ?? null, error: sent.error ?? null, durationMs: sent.durationMs },
        outcome,
      );
      const entry = { jobId: delivery.jobId, webhookId: delivery.webhookId, messageId: delivery.messageId, event: delivery.event, attempt: number, status: sent.status, durationMs: Math.round(sent.durationMs) };
      // What a refused name resolved to goes to the log only (destinations.ts, Refusal).
      const resolved = sent.resolved === undefined ? {} : { resolved: sent.resolved };
      if (!recorded) log({ level: "warn", msg: "webhook attempt made after its claim ran out: another process has the delivery now", ...entry });
      else if (outcome.status === "delivered") log({ msg: "webhook delivered", ...entry });
      else log({ level: "warn", msg: outcome.status === "pending" ? "webhook attempt failed; will retry" : "webhook delivery given up", ...entry, error: sent.error, ...resolved, ...(outcome.status === "pending" ? { retryAt: outcome.retryAt } : {}) });
    } catch (error) {
      // Not stored: the claim runs out and the delivery is tried again (at least once).
      log({ level: "warn", msg: "webhook attempt could not be stored; it will be made again", messageId: delivery.messageId, error: String(error) });
    }
  }

  private outcomeOf(delivery: ClaimedDelivery, number: number, sent: Attempt): DeliveryOutcome {
    if (sent.delivered) return { status: "delivered" };
    if (sent.gone) return { status: "failed", disable: `the receiver answered 410 Gone at ${sent.at}: nothing more is sent to it; subscribe again to receive events` };
    const retryAt = nextAttemptAt(number, delivery.createdAt, Date.now(), { scale: this.options.retryScale });
    return retryAt === undefined ? { status: "failed" } : { status: "pending", retryAt };
  }
}
