import { join } from "node:path";
import { privateDirectory } from "../data-directory";
import type { BackupReport } from "./backup";
import { pruneBackups, scheduledBackupName } from "./backup";
import type { BackupAnswer, BackupAsk } from "./backup-thread";

/** What the schedule tells the server: each backup's end, for the log and /metrics. */
export type Pruned = { removed: string[]; problem?: string };

export type BackupEvents = {
  succeeded(file: string, report: BackupReport, pruned: Pruned): void;
  failed(file: string, message: string, retryInSeconds: number): void;
};

// A failed backup (a full or read-only backup disk, say) is tried again this soon, or at the next interval if sooner.
const retryAfterMs = 5 * 60 * 1000;

/**
 * `importd serve --backup-dir --backup-every --backup-keep`: a backup of the appliance's database every interval, each
 * in a thread of its own (backup-thread.ts) so that the server's threads keep answering, then the oldest of importd's
 * own backups beyond `keep` removed. A failure is reported and tried again; it never stops the server.
 */
export class BackupSchedule {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private running: Worker | undefined;
  private stopped = false;

  constructor(
    private readonly options: { dataDir: string; backupDir: string; everyMs: number; keep: number; threadEntry: URL; events: BackupEvents },
  ) {}

  start(): void {
    privateDirectory(this.options.backupDir);
    this.schedule(this.options.everyMs);
  }

  /**
   * Stops the schedule. A backup under way is abandoned, not waited for: VACUUM INTO of a large database takes most of
   * a minute and cannot be interrupted from here, and a stop must keep its deadline. Its thread ends with the process;
   * what it wrote is under its temporary name, which the next backup into the directory removes.
   */
  stop(): { abandoned: boolean } {
    this.stopped = true;
    clearTimeout(this.timer);
    this.running?.terminate();
    return { abandoned: this.running !== undefined };
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.runOnce(), delayMs);
  }

  private async runOnce(): Promise<void> {
    const { backupDir, dataDir, keep, events } = this.options;
    const file = join(backupDir, scheduledBackupName(new Date()));
    let answer: BackupAnswer;
    try {
      answer = await this.inThread({ dataDir, target: file });
    } catch (error) {
      answer = { type: "failed", message: `the backup thread could not start: ${(error as Error)?.message ?? error}` };
    }
    if (this.stopped) return;
    if (answer.type === "done") {
      // The backup is taken either way; a file that cannot be removed is said, and tried again after the next one.
      let pruned: Pruned;
      try {
        pruned = { removed: pruneBackups(backupDir, keep) };
      } catch (error) {
        pruned = { removed: [], problem: `older backups could not be removed: ${(error as Error).message}` };
      }
      events.succeeded(file, answer.report, pruned);
      this.schedule(this.options.everyMs);
    } else {
      const retryMs = Math.min(retryAfterMs, this.options.everyMs);
      events.failed(file, answer.message, retryMs / 1000);
      this.schedule(retryMs);
    }
  }

  private inThread(ask: BackupAsk): Promise<BackupAnswer> {
    const worker = new Worker(this.options.threadEntry);
    let settle!: (answer: BackupAnswer) => void;
    const answer = new Promise<BackupAnswer>((resolve) => (settle = resolve));
    worker.onmessage = (event: MessageEvent<BackupAnswer>) => settle(event.data);
    worker.onerror = (event) => settle({ type: "failed", message: `the backup thread crashed: ${event.message}` });
    worker.addEventListener("close", () => settle({ type: "failed", message: "the backup thread ended before it answered" }));
    this.running = worker;
    worker.postMessage(ask);
    return answer.finally(() => {
      this.running = undefined;
      worker.terminate();
    });
  }
}
