import type { JobResult } from "../jobs/apply";
import { StaleClaim, StorageError } from "../store/errors";
import type { JobQueue } from "../store/ports";
import type { WorkerPool } from "./pool";

const maxStorageDelayMs = 10_000;
const maxRememberedSlots = 1_000;

export type SchedulerOptions = {
  /** Runs this process has in progress at once, across environments; keep it below the pool size so intake is never starved. */
  maxConcurrentRuns: number;
  /** The wait before a run cut short is tried again; storage faults back off from it, doubling. */
  retryDelayMs: number;
  onError?: (jobId: number, error: unknown) => void;
  /** A run starting at `jobId` goes to a worker; `attempt` counts this one. */
  onStarted?: (jobId: number, attempt: number) => void;
  /** A job reached its terminal state; `seconds` counts from the first try of the run it was applied in. */
  onFinished?: (jobId: number, job: JobResult, seconds: number) => void;
};

/** A run this process has sent to a worker thread. */
type Run = { token: string; jobId: number; attempt: number; startedAt: number; storageWaits: number };

/**
 * What is local to this process about running jobs: when to wake up, how many runs it has in progress at
 * once, and how long to back off after a fault. Which jobs a run takes, in what order, and that an
 * environment has one run at a time are the store's decisions (JobQueue.claimRun); attempts are counted
 * there too, and a job tried too often is given up by the run itself (jobs/apply.ts).
 */
export class JobScheduler {
  // The environments this process has a run of in progress: a hint that spares asking for work that cannot
  // start (the store would refuse it anyway).
  private readonly running = new Map<number, Run>();
  // The runs of `running` waiting out their back-off before trying again, by environment: nothing of theirs is
  // in progress, so a stop ends them at once.
  private readonly backingOff = new Set<number>();
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  // Where a run starting at a job goes: the worker slot that accepted the job and holds its batch parsed (see
  // ParsedBatches), and whether the job is small (the pool's light lane).
  private readonly acceptedOn = new Map<number, { slot?: number; light: boolean }>();
  private asking = false;
  private wokenWhileAsking = false;
  private stopped = false;
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly queue: Pick<JobQueue, "heads">,
    private readonly pool: Pick<WorkerPool, "run">,
    private readonly options: SchedulerOptions,
  ) {}

  /**
   * A job of `environmentId` was just accepted by the worker in `slot` (`light`: a small one); starts it if its
   * environment is free.
   */
  accepted(jobId: number, environmentId: number, slot: number | undefined, light = false): void {
    if (slot !== undefined || light) {
      this.acceptedOn.set(jobId, { slot, light });
      // Only a hint: a long backlog forgets the oldest (their workers have dropped those batches by then anyway).
      if (this.acceptedOn.size > maxRememberedSlots) this.acceptedOn.delete(this.acceptedOn.keys().next().value!);
    }
    // A busy environment takes its next job when the running one is done; under a burst of intakes that is
    // nearly always, and asking the store after each would cost more than the intake itself.
    if (!this.running.has(environmentId) && this.running.size < this.options.maxConcurrentRuns) this.wake();
  }

  /** Asks the store which environments have work that can start, and starts runs for them. Cheap. */
  wake(): void {
    if (this.stopped) return;
    if (this.asking) return void (this.wokenWhileAsking = true);
    this.asking = true;
    // Every store answers in bounded time (on PostgreSQL, each statement has a deadline): no timer of its own here.
    this.queue.heads().then(
      (heads) => {
        this.asking = false;
        for (const head of heads) {
          if (this.stopped || this.running.size >= this.options.maxConcurrentRuns) break;
          if (!this.running.has(head.environmentId)) this.start(head.environmentId, head.jobId, head.attempts + 1);
        }
        this.afterAsking();
      },
      (error) => {
        this.asking = false;
        this.options.onError?.(0, error);
        this.later(() => this.wake(), this.options.retryDelayMs);
        this.afterAsking();
      },
    );
  }

  private afterAsking(): void {
    if (this.wokenWhileAsking && !this.stopped) {
      this.wokenWhileAsking = false;
      this.wake();
    }
    this.settleIfIdle();
  }

  private settleIfIdle(): void {
    if (this.running.size === 0 && !this.asking) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  get runsInProgress(): number {
    return this.running.size;
  }

  /** The first job of each run in progress in a worker thread (not of those backing off). */
  get runningJobIds(): number[] {
    return [...this.running].filter(([environmentId]) => !this.backingOff.has(environmentId)).map(([, run]) => run.jobId);
  }

  /**
   * Stops starting runs; resolves when the ones in progress are done. Those backing off are left to the next
   * start at once: their timers go with the others, and nothing else would end them.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    for (const environmentId of [...this.backingOff]) {
      this.backingOff.delete(environmentId);
      this.done(environmentId, this.running.get(environmentId)!, false, []);
    }
    await this.idle();
  }

  /** Resolves once no run is in progress (none backing off either) and the store is not being asked. */
  idle(): Promise<void> {
    if (this.running.size === 0 && !this.asking) return Promise.resolve();
    return new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  private later(fn: () => void, delayMs: number): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, delayMs);
    this.timers.add(timer);
  }

  private start(environmentId: number, jobId: number, attempt: number, after?: { run: Run; countsAsAttempt: boolean }): void {
    // A retry keeps its run's token: the try before may have failed in its claim (a full disk), whose
    // transaction then rolled back its release too, so the jobs are still held by the first token; a new
    // token would take over nothing and find its environment's run in progress, forever. Only this process
    // holds the token, and a thread that died can commit nothing, so reusing it fences nothing out.
    const run: Run = { token: after?.run.token ?? crypto.randomUUID(), jobId, attempt, startedAt: after?.run.startedAt ?? performance.now(), storageWaits: after?.run.storageWaits ?? 0 };
    this.running.set(environmentId, run);
    this.options.onStarted?.(jobId, attempt);
    const accepted = this.acceptedOn.get(jobId);
    this.acceptedOn.delete(jobId);
    const takeOver = after && { token: after.run.token, countsAsAttempt: after.countsAsAttempt };
    this.pool.run("apply", { environmentId, token: run.token, takeOver }, [], { prefer: accepted?.slot, light: accepted?.light }).then(
      ({ ran, jobs }) => this.done(environmentId, run, ran, jobs),
      (error) => this.retry(environmentId, run, error),
    );
  }

  private done(environmentId: number, run: Run, ran: boolean, jobs: JobResult[]): void {
    const seconds = (performance.now() - run.startedAt) / 1000;
    for (const job of jobs) this.options.onFinished?.(job.id, job, seconds);
    this.running.delete(environmentId);
    // Nothing claimed: the store had nothing for the environment after all. Asking again now would loop.
    if (ran) this.wake();
    this.settleIfIdle();
  }

  // A run cut short (its worker thread died, the disk is full, the database is busy) is not its jobs' fault:
  // it is tried again, taking its jobs over. The environment stays this process's meanwhile, so no later job
  // of it overtakes them. A thread that died counts as an attempt (the store counted it at the claim), so a
  // job that keeps killing its thread is given up; a storage fault does not, and is waited out, backing off.
  private retry(environmentId: number, run: Run, error: unknown): void {
    this.options.onError?.(run.jobId, error);
    if (error instanceof StaleClaim || this.stopped) return this.done(environmentId, run, !this.stopped, []);
    const storage = error instanceof StorageError;
    if (storage) run.storageWaits++;
    const delayMs = storage ? Math.min(maxStorageDelayMs, this.options.retryDelayMs * 2 ** Math.min(run.storageWaits, 10)) : this.options.retryDelayMs;
    this.backingOff.add(environmentId);
    this.later(() => {
      this.backingOff.delete(environmentId);
      this.start(environmentId, run.jobId, storage ? run.attempt : run.attempt + 1, { run, countsAsAttempt: !storage });
    }, delayMs);
  }
}
