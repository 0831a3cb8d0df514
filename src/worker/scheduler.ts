import type { FinishedJob } from "../jobs/apply";
import type { JobRepository } from "../jobs/repository";
import { TaskFailed, type WorkerPool } from "./pool";

// SQLite's answers when the disk is full or failing, or another connection holds the lock too long.
const isStorageFault = (code: string | undefined) => code !== undefined && /^SQLITE_(FULL|IOERR|BUSY|LOCKED|CANTOPEN|PROTOCOL)/.test(code);
const maxStorageDelayMs = 10_000;
const maxRememberedSlots = 1_000;

export type SchedulerOptions = {
  /** Jobs applied at once, across environments; keep it below the pool size so intake is never starved. */
  maxConcurrentJobs: number;
  /** Attempts before a job whose worker keeps failing is given up as Failed. */
  maxAttempts: number;
  retryDelayMs: number;
  onError?: (jobId: number, error: unknown) => void;
  /** A job goes to a worker (again, after a retry). */
  onStarted?: (jobId: number, attempt: number) => void;
  /** A job reached its terminal state; `seconds` counts from the first attempt of the run it was applied in. */
  onFinished?: (jobId: number, job: FinishedJob, seconds: number) => void;
};

/**
 * Decides which job runs next. Jobs of one environment run strictly one at a time, in id order
 * (ids are assigned in commit order, so that is acceptance order); environments run in parallel.
 * A run starts at an environment's oldest pending job and may take the small ones after it along (see
 * applyJobs). The database is the queue: nothing is held only in memory, so a restart loses nothing.
 */
export class JobScheduler {
  private readonly busyEnvironments = new Set<number>();
  private readonly attempts = new Map<number, number>();
  private readonly startedAt = new Map<number, number>();
  private readonly storageWaits = new Map<number, number>();
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  // The worker slot that accepted a job and holds its batch parsed (see ParsedBatches): its apply goes there.
  private readonly acceptedOn = new Map<number, number>();
  // Environments whose worker crashed: their jobs run one per transaction, so that a job that kills its
  // worker is found and given up alone, not with the jobs applied along with it. Until their queue is empty.
  private readonly aloneEnvironments = new Set<number>();
  private stopped = false;
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly jobs: JobRepository,
    private readonly pool: WorkerPool,
    private readonly options: SchedulerOptions,
  ) {}

  /** A job of `environmentId` was just accepted by the worker in `slot`; starts it if its environment is free. */
  accepted(jobId: number, environmentId: number, slot: number | undefined): void {
    if (slot !== undefined) {
      this.acceptedOn.set(jobId, slot);
      // Only a hint: a long backlog forgets the oldest (their workers have dropped those batches by then anyway).
      if (this.acceptedOn.size > maxRememberedSlots) this.acceptedOn.delete(this.acceptedOn.keys().next().value!);
    }
    // A busy environment takes its next job when the running one is released; under a burst of intakes
    // that is nearly always, and asking the database after each would cost more than the intake itself.
    if (!this.busyEnvironments.has(environmentId) && this.busyEnvironments.size < this.options.maxConcurrentJobs) this.kick();
  }

  /** Starts whatever can start now. Cheap; called after each intake and each finished job. */
  kick(): void {
    if (this.stopped) return;
    const next = this.jobs.nextPendingPerEnvironment();
    for (const environmentId of this.aloneEnvironments) {
      if (!this.busyEnvironments.has(environmentId) && !next.some((job) => job.environmentId === environmentId)) this.aloneEnvironments.delete(environmentId);
    }
    for (const { environmentId, jobId } of next) {
      if (this.busyEnvironments.size >= this.options.maxConcurrentJobs) break;
      if (this.busyEnvironments.has(environmentId)) continue;
      this.busyEnvironments.add(environmentId);
      this.run(environmentId, jobId);
    }
    if (this.busyEnvironments.size === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  get runningJobs(): number {
    return this.busyEnvironments.size;
  }

  /** Stops starting jobs; resolves when the running ones are done (or failed over to a restart). */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    if (this.busyEnvironments.size === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  private release(environmentId: number, jobId: number, finished: FinishedJob[] = []): void {
    const seconds = (performance.now() - this.startedAt.get(jobId)!) / 1000;
    for (const job of finished) this.options.onFinished?.(job.id, job, seconds);
    this.attempts.delete(jobId);
    this.storageWaits.delete(jobId);
    this.startedAt.delete(jobId);
    this.busyEnvironments.delete(environmentId);
    if (this.stopped && this.busyEnvironments.size === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
    this.kick();
  }

  private run(environmentId: number, jobId: number): void {
    if (!this.startedAt.has(jobId)) this.startedAt.set(jobId, performance.now());
    this.options.onStarted?.(jobId, (this.attempts.get(jobId) ?? 0) + 1);
    const prefer = this.acceptedOn.get(jobId);
    this.acceptedOn.delete(jobId);
    this.pool.run("apply", { jobId, alone: this.aloneEnvironments.has(environmentId) }, [], { prefer }).then(
      ({ jobs }) => this.release(environmentId, jobId, jobs),
      (error) => this.retry(environmentId, jobId, error),
    );
  }

  // An infrastructure fault (a crashed worker, a full disk, a locked database) is not the job's fault: run it
  // again. The environment stays busy meanwhile, so no later job of it can overtake this one. Only a crashed
  // worker counts toward giving up (a poison job); storage faults wait, backing off, for as long as they last.
  private retry(environmentId: number, jobId: number, error: unknown): void {
    this.options.onError?.(jobId, error);
    const storage = error instanceof TaskFailed && isStorageFault(error.code);
    const attempt = (this.attempts.get(jobId) ?? 0) + (storage ? 0 : 1);
    if (!storage) this.aloneEnvironments.add(environmentId);
    this.attempts.set(jobId, attempt);
    const waits = (this.storageWaits.get(jobId) ?? 0) + (storage ? 1 : 0);
    this.storageWaits.set(jobId, waits);
    if (this.stopped) return this.release(environmentId, jobId);
    const delayMs = storage ? Math.min(maxStorageDelayMs, this.options.retryDelayMs * 2 ** Math.min(waits, 10)) : this.options.retryDelayMs * attempt;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (this.stopped) return this.release(environmentId, jobId);
      if (storage || attempt < this.options.maxAttempts) return this.run(environmentId, jobId);
      const message = `Nothing was applied: the job could not be processed after ${attempt} attempts (the worker failed: ${(error as Error)?.message ?? error}). Re-send the batch; if it fails again, split it and contact the operator.`;
      this.pool.run("giveUp", { jobId, message }).then(
        ({ jobs }) => this.release(environmentId, jobId, jobs),
        (giveUpError) => this.retry(environmentId, jobId, giveUpError),
      );
    }, delayMs);
    this.timers.add(timer);
  }
}
