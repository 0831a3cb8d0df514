import { afterEach, describe, expect, test } from "bun:test";
import { maxAttempts, runNext } from "../../src/jobs/apply";
import { StorageFull } from "../../src/store/errors";
import type { ClaimedRun, JobQueue } from "../../src/store/ports";
import type { SqliteStore } from "../../src/store/sqlite/store";
import { WorkerCrashed, type Placement, type WorkerPool } from "../../src/worker/pool";
import { JobScheduler } from "../../src/worker/scheduler";
import { sqliteStoreWith } from "../helpers/store";
import { until, within } from "../helpers/until";

let store: SqliteStore | undefined;
afterEach(async () => {
  await store?.close();
  store = undefined;
});

type Fault = (jobId: number, attempt: number) => Error | undefined;

/**
 * A real SQLite store with environments 1 to 3 and one-record jobs queued in the given environments (job ids
 * from 1, in this order), and a pool that runs each apply task in-process with the real runNext. `fault`
 * may make a run fail after its claim, as a worker thread that dies mid-run or a full disk would.
 */
async function harness(environmentOfJob: number[], fault: Fault = () => undefined, during?: (jobIds: number[]) => Promise<void>) {
  store = await sqliteStoreWith("one", "two", "three");
  const queue = store.queue;
  for (const [index, environmentId] of environmentOfJob.entries()) {
    const body = new TextEncoder().encode(JSON.stringify([{ id: `area-${index + 1}`, name: "Area" }]));
    await queue.enqueue([{ environmentId, type: "SubArea", recordCount: 1, body }]);
  }
  const calls: Array<[string, number]> = [];
  const runs: number[][] = [];
  const heads = { count: 0 };
  const counting: Pick<JobQueue, "heads"> = {
    heads: () => {
      heads.count++;
      return queue.heads();
    },
  };
  const pool = {
    run: async (task: string, input: { environmentId: number; token: string; takeOver?: { token: string; countsAsAttempt: boolean } }) => {
      let claimed: ClaimedRun | undefined;
      const faulty: JobQueue = {
        ...queue,
        enqueue: (requests) => queue.enqueue(requests),
        heads: () => queue.heads(),
        payload: (jobId) => queue.payload(jobId),
        recoverInterrupted: () => queue.recoverInterrupted(),
        purge: (before) => queue.purge(before),
        cancel: (environmentId, jobId, output) => queue.cancel(environmentId, jobId, output),
        abandonRun: (run) => queue.abandonRun(run),
        claimRun: async (request, limits) => {
          claimed = await queue.claimRun(request, limits);
          if (claimed) {
            const first = claimed.jobs[0]!;
            calls.push([task, first.id]);
            runs.push(claimed.jobs.map((job) => job.id));
            const error = first.attempts <= maxAttempts ? fault(first.id, first.attempts) : undefined;
            if (error) throw error;
          }
          return claimed;
        },
        completeRun: async (run, apply) => {
          await during?.(run.jobs.map((job) => job.id));
          return queue.completeRun(run, apply);
        },
      };
      const jobs = await runNext(faulty, input.environmentId, { token: input.token, takeOver: input.takeOver });
      return { ran: jobs !== undefined, jobs: jobs ?? [] };
    },
  } as unknown as WorkerPool;
  return { queue: counting, pool, calls, runs, heads, store };
}

/** Until the scheduler has nothing in progress and nothing more to ask the store (a finished run asks again). */
const settle = (scheduler: JobScheduler) => within(scheduler.idle(), { what: "the scheduler to be idle" });

const jobOfEnvironmentOne = async (jobId: number) => (await store!.jobs.find(1, jobId, ""))!;

describe("JobScheduler", () => {
  test("runs one job per environment at a time, in id order, environments in parallel", async () => {
    const running = new Set<number>();
    const overlaps: string[] = [];
    const environmentOf = new Map([[1, 1], [2, 1], [3, 2], [4, 1]]);
    const { queue, pool, runs } = await harness([1, 1, 2, 1], undefined, async (jobIds) => {
      const environment = environmentOf.get(jobIds[0]!)!;
      if (running.has(environment)) overlaps.push(`environment ${environment} ran two runs at once`);
      running.add(environment);
      await Bun.sleep(10);
      running.delete(environment);
    });
    const scheduler = new JobScheduler(queue, pool, { maxConcurrentRuns: 4, retryDelayMs: 1 });
    scheduler.wake();
    await settle(scheduler);
    expect(overlaps).toEqual([]);
    // Environment 1's three small jobs went in one run, in order; environment 2's in another, at the same time.
    expect(runs.flat().filter((id) => environmentOf.get(id) === 1)).toEqual([1, 2, 4]);
    expect(runs.flat().sort()).toEqual([1, 2, 3, 4]);
  });

  test("an intake for an environment that is busy does not ask the store for work; one for a free environment does", async () => {
    let release = () => {};
    const blocked = new Promise<void>((resolve) => (release = resolve));
    const { queue, pool, calls, heads } = await harness([1], undefined, () => blocked);
    const scheduler = new JobScheduler(queue, pool, { maxConcurrentRuns: 2, retryDelayMs: 1 });
    scheduler.wake();
    await until(() => calls.length === 1, { what: "job 1's run to start" });
    expect(heads.count).toBe(1);
    await store!.queue.enqueue([{ environmentId: 1, type: "SubArea", recordCount: 1, body: new TextEncoder().encode('[{"id":"x","name":"X"}]') }]);
    scheduler.accepted(2, 1, undefined);
    expect(heads.count).toBe(1);
    await store!.queue.enqueue([{ environmentId: 2, type: "SubArea", recordCount: 1, body: new TextEncoder().encode('[{"id":"y","name":"Y"}]') }]);
    scheduler.accepted(3, 2, undefined);
    expect(heads.count).toBe(2);
    await until(() => calls.length === 2, { what: "job 3's run to start" });
    expect(calls).toEqual([["apply", 1], ["apply", 3]]);
    release();
    await settle(scheduler);
  });

  test("a run starting at a job goes where the job was accepted: to the slot that holds its batch, in the light lane when it is small", async () => {
    store = await sqliteStoreWith("one", "two", "three");
    const body = new TextEncoder().encode('[{"id":"x","name":"X"}]');
    // The first run of each environment (the stub claims nothing, so later wakes start its job again, with no hint left).
    const placements = new Map<number, Placement | undefined>();
    const pool = {
      run: async (_task: string, input: { environmentId: number }, _transfer: unknown, placement?: Placement) => {
        if (!placements.has(input.environmentId)) placements.set(input.environmentId, placement);
        return { ran: false, jobs: [] };
      },
    } as unknown as WorkerPool;
    const scheduler = new JobScheduler(store.queue, pool, { maxConcurrentRuns: 3, retryDelayMs: 1 });
    for (const [environmentId, slot, light] of [[1, 0, true], [2, 1, false], [3, undefined, undefined]] as const) {
      const [enqueued] = await store.queue.enqueue([{ environmentId, type: "SubArea", recordCount: 1, body }]);
      scheduler.accepted((enqueued as { job: { id: number } }).job.id, environmentId, slot, light);
      await until(() => placements.has(environmentId), { what: `environment ${environmentId}'s run to start` });
    }
    await settle(scheduler);
    expect([...placements].map(([environmentId, placement]) => [environmentId, placement?.prefer, placement?.light])).toEqual([
      [1, 0, true],
      [2, 1, false],
      [3, undefined, undefined],
    ]);
  });

  test("respects the cap on runs in progress at once", async () => {
    let release = () => {};
    const blocked = new Promise<void>((resolve) => (release = resolve));
    const { queue, pool, calls } = await harness([1, 2, 3], undefined, () => blocked);
    const scheduler = new JobScheduler(queue, pool, { maxConcurrentRuns: 2, retryDelayMs: 1 });
    scheduler.wake();
    await until(() => calls.length === 2, { what: "two runs to start" });
    // The runs a wake starts are started together: a third would be in progress already.
    expect(scheduler.runsInProgress).toBe(2);
    expect(calls).toHaveLength(2);
    release();
    await settle(scheduler);
  });

  test("a job whose worker crashed is retried, and the environment's next job waits for it", async () => {
    const { queue, pool, calls } = await harness([1, 1], (jobId, attempt) => (jobId === 1 && attempt === 1 ? new WorkerCrashed("worker exited") : undefined));
    const errors: number[] = [];
    const scheduler = new JobScheduler(queue, pool, { maxConcurrentRuns: 2, retryDelayMs: 1, onError: (jobId) => errors.push(jobId) });
    scheduler.wake();
    await settle(scheduler);
    expect(calls).toEqual([["apply", 1], ["apply", 1], ["apply", 2]]);
    expect(errors).toEqual([1]);
  });

  test("after a crash, the environment's jobs are applied one per run (a poison job is found alone) until its queue is empty", async () => {
    const { queue, pool, runs, store } = await harness([1, 1, 1], (jobId, attempt) => (jobId === 1 && attempt === 1 ? new WorkerCrashed("worker exited") : undefined));
    const scheduler = new JobScheduler(queue, pool, { maxConcurrentRuns: 2, retryDelayMs: 1 });
    scheduler.wake();
    await settle(scheduler);
    // The crashed run held all three; each was tried, so each runs alone after it.
    expect(runs).toEqual([[1, 2, 3], [1], [2], [3]]);
    // Its queue ran empty: new jobs, never tried, go together again.
    for (const id of ["a", "b"]) await store.queue.enqueue([{ environmentId: 1, type: "SubArea", recordCount: 1, body: new TextEncoder().encode(`[{"id":"${id}","name":"A"}]`) }]);
    scheduler.wake();
    await settle(scheduler);
    expect(runs.at(-1)).toEqual([4, 5]);
  });

  test("a full disk does not make an environment's runs single-job: it is not the jobs' fault", async () => {
    let full = true;
    const { queue, pool, runs } = await harness([1, 1], (jobId) => (jobId === 1 && full ? ((full = false), new StorageFull("database or disk is full")) : undefined));
    const scheduler = new JobScheduler(queue, pool, { maxConcurrentRuns: 2, retryDelayMs: 1 });
    scheduler.wake();
    await settle(scheduler);
    expect(runs).toEqual([[1, 2], [1, 2]]);
  });

  test(`a job that keeps crashing its worker is given up after ${maxAttempts} attempts, and the queue moves on`, async () => {
    const { queue, pool, calls } = await harness([1, 1], (jobId) => (jobId === 1 ? new WorkerCrashed("worker exited") : undefined));
    const scheduler = new JobScheduler(queue, pool, { maxConcurrentRuns: 2, retryDelayMs: 1 });
    scheduler.wake();
    await settle(scheduler);
    // Three runs cut short, then the fourth claim gives it up; then job 2.
    expect(calls).toEqual([["apply", 1], ["apply", 1], ["apply", 1], ["apply", 1], ["apply", 2]]);
    const job = await jobOfEnvironmentOne(1);
    expect(job.status).toBe("Failed");
    expect(job.output!.message).toContain(`after ${maxAttempts} attempts`);
  });

  test("reports each start (with its attempt) and each finish once, given-up jobs included", async () => {
    const { queue, pool } = await harness([1, 1, 2], (jobId, attempt) => {
      if (jobId === 1 && attempt === 1) return new WorkerCrashed("worker exited");
      if (jobId === 3) return new WorkerCrashed("poison");
      return undefined;
    });
    const started: Array<[number, number]> = [];
    const finished: Array<[number, string, number]> = [];
    const scheduler = new JobScheduler(queue, pool, {
      maxConcurrentRuns: 2,
      retryDelayMs: 1,
      onStarted: (jobId, attempt) => started.push([jobId, attempt]),
      onFinished: (jobId, job, seconds) => finished.push([jobId, job.status, seconds]),
    });
    scheduler.wake();
    await settle(scheduler);
    expect(started.sort()).toEqual([[1, 1], [1, 2], [2, 2], [3, 1], [3, 2], [3, 3], [3, 4]]);
    expect(finished.map(([jobId, status]) => [jobId, status]).sort()).toEqual([[1, "Succeeded"], [2, "Succeeded"], [3, "Failed"]]);
    for (const [, , seconds] of finished) expect(seconds).toBeGreaterThan(0);
  });

  test("a stop while a run backs off after a fault ends at once, leaving the job to the next start", async () => {
    const { queue, pool, calls } = await harness([1], () => new StorageFull("database or disk is full"));
    const scheduler = new JobScheduler(queue, pool, { maxConcurrentRuns: 2, retryDelayMs: 60_000 });
    scheduler.wake();
    await until(() => calls.length === 1 && scheduler.runsInProgress === 1 && scheduler.runningJobIds.length === 0, { what: "the run to fail and back off" });
    // Backing off for a minute: nothing of it is in a thread, so no job to wait for.
    expect(scheduler.runsInProgress).toBe(1);
    expect(scheduler.runningJobIds).toEqual([]);
    const stopping = scheduler.stop();
    expect(await Promise.race([stopping.then(() => "stopped"), Bun.sleep(1_000).then(() => "still waiting")])).toBe("stopped");
    expect(scheduler.runsInProgress).toBe(0);
    expect((await jobOfEnvironmentOne(1)).status).toBe("Processing");
  });

  test("a stop waits for a run in progress, which commits", async () => {
    let release!: () => void;
    const slow = await harness([1], undefined, () => new Promise<void>((resolve) => (release = resolve)));
    const busy = new JobScheduler(slow.queue, slow.pool, { maxConcurrentRuns: 2, retryDelayMs: 1 });
    busy.wake();
    await until(() => release, { what: "job 1's run to reach its commit" });
    expect(busy.runningJobIds).toEqual([1]);
    const busyStopping = busy.stop();
    expect(await Promise.race([busyStopping.then(() => "stopped"), Bun.sleep(100).then(() => "still waiting")])).toBe("still waiting");
    release();
    await busyStopping;
    expect((await jobOfEnvironmentOne(1)).status).toBe("Succeeded");
  });

  test("a full disk is waited out, however long: the job is retried, never given up, and its environment's next job waits", async () => {
    let fullFor = 6;
    const { queue, pool, calls } = await harness([1, 1], (jobId, attempt) => (jobId === 1 && attempt <= 1 && fullFor-- > 0 ? new StorageFull("database or disk is full") : undefined));
    const finished: Array<[number, string]> = [];
    const scheduler = new JobScheduler(queue, pool, { maxConcurrentRuns: 2, retryDelayMs: 1, onFinished: (jobId, job) => finished.push([jobId, job.status]) });
    scheduler.wake();
    await settle(scheduler);
    expect(calls).toEqual(Array.from({ length: 7 }, (): [string, number] => ["apply", 1]));
    expect(finished).toEqual([[1, "Succeeded"], [2, "Succeeded"]]);
  });
});
