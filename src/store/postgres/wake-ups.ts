import type pg from "pg";
import type { StoreEvents } from "../ports";
import { openClient } from "./connection";
import { doneChannel, workChannel } from "./jobs";

const rescanEveryMs = 2_000;
/** What the listener is asked at every periodic look, to tell that it still answers. */
export const listenerCheck = "SELECT 'listening'";
const maxReconnectDelayMs = 5_000;

/**
 * An instance's news from the others: LISTEN on a connection of its own, outside the pools, `work` at every NOTIFY
 * of queued work and `jobsFinished` at every finished run. A connection that is lost, or that stops answering (it is
 * asked at every periodic look), is replaced, backing off, and every (re)start of listening tells of work and of
 * `missed` news too, since notifications sent meanwhile are gone. A slow periodic wake stays as the fallback, and is
 * what finds the runs of an instance that died (it sends no notification).
 */
export class WakeUps {
  private client?: pg.Client;
  private listening = false;
  private checking = false;
  private stopped = false;
  private reconnectDelayMs = 100;
  private readonly rescan: ReturnType<typeof setInterval>;
  private reconnecting?: ReturnType<typeof setTimeout>;

  constructor(
    private readonly url: string,
    private readonly events: StoreEvents,
    private readonly instance?: string,
  ) {
    this.rescan = setInterval(() => {
      this.events.work();
      this.check();
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
    const client = openClient(this.url, this.instance);
    this.client = client;
    client.on("notification", ({ channel, payload = "" }) => {
      if (channel === workChannel) this.events.work();
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

  /** A connection that does not answer within the statement deadline is taken for lost. */
  private check(): void {
    const client = this.client;
    if (!client || !this.listening || this.checking) return;
    this.checking = true;
    client.query(listenerCheck).then(
      () => (this.checking = false),
      () => {
        this.checking = false;
        this.drop(client);
      },
    );
  }

  /** Lets go of `client` (lost, or never listening), and listens again on a new one. */
  private drop(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.listening = false;
    client.end().catch(() => {});
    this.listenSoon();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.rescan);
    clearTimeout(this.reconnecting);
    const client = this.client;
    this.client = undefined;
    this.listening = false;
    await client?.end().catch(() => {});
  }
}
