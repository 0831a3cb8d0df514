import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { JobResult } from "../jobs/apply";
import { jobStatuses } from "../domain/job";
import type { JobReads } from "../store/ports";

/**
 * The Prometheus metrics of one server. Counters are kept in memory (they start at 0 with the process,
 * as Prometheus expects); jobs by state and queue depth are read from the store at scrape time, so
 * they are right after a restart too.
 */
export class Metrics {
  private readonly registry = new Registry();
  // Requests are counted here, by "<method> <status>", and handed to prom-client when scraped: its inc() with
  // labels costs a status poll about as much as its key check.
  private readonly answered = new Map<string, number>();
  private readonly requests = new Counter({
    name: "importd_http_requests_total",
    help: "HTTP requests answered, by method and status code.",
    labelNames: ["method", "status"] as const,
    registers: [this.registry],
    collect: () => this.countAnswered(),
  });
  private readonly recordsApplied = new Counter({
    name: "importd_records_applied_total",
    help: "Records upserted by finished jobs, by job type.",
    labelNames: ["type"] as const,
    registers: [this.registry],
  });
  private readonly recordsRejected = new Counter({
    name: "importd_records_rejected_total",
    help: "Records rejected by finished jobs, by job type.",
    labelNames: ["type"] as const,
    registers: [this.registry],
  });
  private readonly jobDuration = new Histogram({
    name: "importd_job_duration_seconds",
    help: "Time from a job's first attempt to its terminal state, by job type and outcome.",
    labelNames: ["type", "status"] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });

  // Only on a server that takes scheduled backups (--backup-dir): elsewhere a last success of 0 would set off alerts.
  private readonly backups?: { total: Counter<"outcome">; lastSuccess: Gauge; lastDuration: Gauge };

  constructor(jobs: Pick<JobReads, "countByStatus" | "queueDepth">, heldPolls: () => number = () => 0, { environmentLabels = false, backups = false } = {}) {
    if (backups) {
      this.backups = {
        total: new Counter({
          name: "importd_backups_total",
          help: "Scheduled backups (--backup-dir) this process has taken, by outcome: succeeded or failed (a failed one is tried again).",
          labelNames: ["outcome"] as const,
          registers: [this.registry],
        }),
        lastSuccess: new Gauge({
          name: "importd_backup_last_success_timestamp_seconds",
          help: "When the last scheduled backup that succeeded ended, in seconds since the Unix epoch (0: none yet since the start).",
          registers: [this.registry],
        }),
        lastDuration: new Gauge({ name: "importd_backup_last_duration_seconds", help: "How long the last scheduled backup that succeeded took.", registers: [this.registry] }),
      };
      // Both series from the start, at 0, so that an alert on failures sees the first one.
      for (const outcome of ["succeeded", "failed"]) this.backups.total.inc({ outcome }, 0);
    }
    new Gauge({
      name: "importd_held_polls",
      help: "Status requests held open by this instance until their job ends (Prefer: wait).",
      registers: [this.registry],
      collect() {
        this.set(heldPolls());
      },
    });
    new Gauge({
      name: "importd_jobs",
      help: "Jobs by state, all environments (finished jobs count until their documents expire).",
      labelNames: ["state"] as const,
      registers: [this.registry],
      async collect() {
        const counts = new Map((await jobs.countByStatus()).map(({ status, count }) => [status, count]));
        for (const state of jobStatuses) this.set({ state }, counts.get(state) ?? 0);
      },
    });
    // Per environment only when the operator asks (--metrics-environment-labels): /metrics needs no key, and without
    // one nothing may tell an environment's name or numbers (DECISIONS 15).
    new Gauge({
      name: "importd_queue_depth",
      help: `Jobs waiting to run (Pending), ${environmentLabels ? "by environment" : "all environments"}.`,
      labelNames: environmentLabels ? (["environment"] as const) : [],
      registers: [this.registry],
      async collect() {
        const depths = await jobs.queueDepth();
        this.reset();
        if (environmentLabels) for (const { environment, pending } of depths) this.set({ environment }, pending);
        else this.set(depths.reduce((total, { pending }) => total + pending, 0));
      },
    });
  }

  readonly contentType = this.registry.contentType;

  requestAnswered(method: string, status: number): void {
    const key = `${method} ${status}`;
    this.answered.set(key, (this.answered.get(key) ?? 0) + 1);
  }

  private countAnswered(): void {
    for (const [key, count] of this.answered) {
      const [method, status] = key.split(" ") as [string, string];
      this.requests.inc({ method, status }, count);
    }
    this.answered.clear();
  }

  jobFinished(job: JobResult, seconds: number): void {
    this.recordsApplied.inc({ type: job.type }, job.applied);
    this.recordsRejected.inc({ type: job.type }, job.rejected);
    this.jobDuration.observe({ type: job.type, status: job.status }, seconds);
  }

  backupSucceeded(endedAt: Date, seconds: number): void {
    this.backups?.total.inc({ outcome: "succeeded" });
    this.backups?.lastSuccess.set(endedAt.getTime() / 1000);
    this.backups?.lastDuration.set(seconds);
  }

  backupFailed(): void {
    this.backups?.total.inc({ outcome: "failed" });
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
