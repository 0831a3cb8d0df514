import type { StoreEvents } from "../ports";
import { connect, type Sql } from "./connection";
import { doneChannel, workChannel } from "./jobs";

const rescanEveryMs = 2_000;
const maxReconnectDelayMs = 5_000;

/**
 * An instance's news from the others: LISTEN on a connection of its own, `work` at every NOTIFY of queued work
 * and `jobsFinished` at every finished run. A lost connection is listened on again, backing off, and every
 * (re)start of listening tells of work and of `missed` news too, since notifications sent meanwhile are gone. A
 * slow periodic wake stays as the fallback, and is what finds the runs of an instance that died (it sends no
 * notification).
 */
export class WakeUps {
  private readonly sql: Sql;
  private listening = false;
  private stopped = false;
  private reconnectDelayMs = 100;
  private readonly rescan: ReturnType<typeof setInterval>;
  private reconnecting?: ReturnType<typeof setTimeout>;

  constructor(
    url: string,
    private readonly events: StoreEvents,
    instance?: string,
  ) {
    this.sql = connect(url, {
      max: 1,
      instance,
      keepIdle: true,
      onnotify: (channel, payload) => {
        if (channel === workChannel) this.events.work();
        else if (channel === doneChannel) this.events.jobsFinished(payload.split(",").map(Number).filter(Number.isSafeInteger));
      },
      onclose: () => {
        this.listening = false;
        this.listenSoon();
      },
    }).sql;
    this.rescan = setInterval(() => this.events.work(), rescanEveryMs);
    this.listenSoon(0);
  }

  /** Whether notifications reach this instance now (for /readyz). */
  get up(): boolean {
    return this.listening;
  }

  private listenSoon(delayMs = this.reconnectDelayMs): void {
    if (this.stopped || this.reconnecting) return;
    this.reconnecting = setTimeout(async () => {
      this.reconnecting = undefined;
      try {
        await this.sql.unsafe(`LISTEN ${workChannel}`);
        await this.sql.unsafe(`LISTEN ${doneChannel}`);
        this.listening = true;
        this.reconnectDelayMs = 100;
        this.events.work();
        this.events.missed();
      } catch {
        this.reconnectDelayMs = Math.min(maxReconnectDelayMs, this.reconnectDelayMs * 2);
        this.listenSoon();
      }
    }, delayMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.rescan);
    clearTimeout(this.reconnecting);
    await this.sql.end({ timeout: 1 });
  }
}
