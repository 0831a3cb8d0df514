import type pg from "pg";
import type { StoreEvents } from "../ports";
import { openClient } from "./connection";
import { doneChannel, workChannel } from "./jobs";

const rescanEveryMs = 2_000;
/** What the listener is asked at every periodic look, to tell that it still answers. */
export const listenerCheck = "SELECT 'listening'";
const maxReconnectDelayMs = 5_000;
const notifiedWorkDelayMs = 10;

/**
 * An instance's news from the others: LISTEN on a connection of its own, `work` at every NOTIFY of queued work and
 * `jobsFinished` at every finished run. A connection lost, or silent, is replaced, backing off, and every (re)start
 * tells of work and of `missed` news, since notifications sent meanwhile are gone. A periodic wake is the fallback,
 * and finds the runs of an instance that died (it sends no notification).
 */
export class WakeUps {
  private client?: pg.Client;
  private listening = false;
  private stopped = false;
  private reconnectDelayMs = 100;
  private readonly rescan: ReturnType<typeof setInterval>;
  private reconnecting?: ReturnType<typeof setTimeout>;
  private waking?: ReturnType<typeof setTimeout>;

  constructor(
    private readonly url: string,
    private readonly events: StoreEvents,
    private readonly instance?: string,
  ) {
    this.rescan = setInterval(() => {
      this.events.work();
      // A listener that gives no answer within the statement deadline is taken for lost.
      const client = this.client;
      if (client && this.listening) client.query(listenerCheck).catch(() => this.drop(client));
    }, rescanEveryMs);
    this.listenSoon(0);
  }

  /** Whether notifications reach this instance now (for /readyz). */
  get up(): boolean {
    return this.listening;
  }

  private listenSoon(delayMs = this.reconnectDelayMs): void {
    if (this.stopped || this.reconnecting) return;
    this.reconnecting = setTimeout(() => {
      this.reconnecting = undefined;
      void this.listen();
    }, delayMs);
  }

  private async listen(): Promise<void> {
    const client = openClient(this.url, { instance: this.instance });
    this.client = client;
    client.on("notification", ({ channel, payload = "" }) => {
      // Work this instance queued itself, it knows of; a burst of others' wakes it once (each wake asks the database).
      if (channel === workChannel && payload !== this.instance) this.waking ??= setTimeout(() => ((this.waking = undefined), this.events.work()), notifiedWorkDelayMs);
      else if (channel === doneChannel) this.events.jobsFinished(payload.split(",").map(Number).filter(Number.isSafeInteger));
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${workChannel}; LISTEN ${doneChannel}`);
    } catch {
      this.reconnectDelayMs = Math.min(maxReconnectDelayMs, this.reconnectDelayMs * 2);
      return this.drop(client);
    }
    if (this.client !== client) return; // stopped meanwhile
    client.once("end", () => this.drop(client));
    this.listening = true;
    this.reconnectDelayMs = 100;
    this.events.work();
    this.events.missed();
  }

  /**
   * Lets go of `client` (lost, or never listening), and listens again on a new one unless stopped. Not waited for: on
   * a half-open connection, ending can take as long as TCP gives up.
   */
  private drop(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.listening = false;
    client.end().catch(() => {});
    this.listenSoon();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.rescan);
    clearTimeout(this.reconnecting);
    clearTimeout(this.waking);
    if (this.client) this.drop(this.client);
  }
}
