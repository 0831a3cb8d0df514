import { connect, type Sql } from "./connection";
import { workChannel } from "./jobs";

const rescanEveryMs = 2_000;
const maxReconnectDelayMs = 5_000;

/**
 * An instance's wake-ups from the others: LISTEN on a connection of its own, and `wake` at every NOTIFY of
 * queued work. A lost connection is listened on again, backing off, and every (re)start of listening wakes too,
 * since notifications sent meanwhile are gone. A slow periodic wake stays as the fallback, and is what finds
 * the runs of an instance that died (it sends no notification).
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
    private readonly wake: () => void,
  ) {
    this.sql = connect(url, {
      max: 1,
      keepIdle: true,
      onnotify: (channel) => channel === workChannel && this.wake(),
      onclose: () => {
        this.listening = false;
        this.listenSoon();
      },
    }).sql;
    this.rescan = setInterval(() => this.wake(), rescanEveryMs);
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
        this.listening = true;
        this.reconnectDelayMs = 100;
        this.wake();
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
