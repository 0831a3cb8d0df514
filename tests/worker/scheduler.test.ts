import { describe, expect, test } from "bun:test";
import type { JobRepository } from "../../src/jobs/repository";
import { TaskFailed, WorkerCrashed, type WorkerPool } from "../../src/worker/pool";
import { JobScheduler } from "../../src/worker/scheduler";

/** An in-memory queue and a pool whose apply outcome each test scripts. */
function harness(pending: Array<{ environmentId: number; jobId: number }>, apply: (jobId: number, attempt: number) => Promise<unknown>) {
  const calls: Array<[string, number]> = [];
  const alone: boolean[] = [];
  const attempts = new Map<number, number>();
  const queries = { count: 0 };
  const jobs = {
    nextPendingPerEnvironment: () => {
      queries.count++;
      const firstPerEnvironment = new Map<number, number>();
      for (const job of pending) if (!firstPerEnvironment.has(job.environmentId)) firstPerEnvironment.set(job.environmentId, job.jobId);
      return [...firstPerEnvironment].map(([environmentId, jobId]) => ({ environmentId, jobId }));
    },
  } as unknown as JobRepository;
  const finish = (jobId: number) => pending.splice(pending.findIndex((job) => job.jobId === jobId), 1);
  const pool = {
    run: async (task: string, input: { jobId: number; alone?: boolean }) => {
      calls.push([task, input.jobId]);
      if (task === "apply") alone.push(input.alone ?? false);
      if (task === "giveUp") return finish(input.jobId), { jobs: [{ id: input.jobId, type: "Asset", status: "Failed", total: 1, applied: 0, rejected: 1 }] };
      const attempt = (attempts.get(input.jobId) ?? 0) + 1;
      attempts.set(input.jobId, attempt);
      await apply(input.jobId, attempt);
      finish(input.jobId);
      return { jobs: [{ id: input.jobId, type: "Asset", status: "Succeeded", total: 1, applied: 1, rejected: 0 }] };
    },
  } as unknown as WorkerPool;
  return { jobs, pool, calls, alone, pending, queries };
}

const settle = async (scheduler: JobScheduler) => {
  for (let i = 0; i < 200 && scheduler.runningJobs > 0; i++) await Bun.sleep(5);
};

describe("JobScheduler", () => {
  test("runs one job per environment at a time, in id order, environments in parallel", async () => {
    const running = new Set<number>();
    const overlaps: string[] = [];
    const environmentOf = new Map([[1, 1], [2, 1], [3, 2], [4, 1]]);
    const { jobs, pool, calls } = harness(
      [{ environmentId: 1, jobId: 1 }, { environmentId: 1, jobId: 2 }, { environmentId: 2, jobId: 3 }, { environmentId: 1, jobId: 4 }],
      async (jobId) => {
        const environment = environmentOf.get(jobId)!;
        if (running.has(environment)) overlaps.push(`environment ${environment} ran two jobs at once`);
        running.add(environment);
        await Bun.sleep(10);
        running.delete(environment);
      },
    );
    const scheduler = new JobScheduler(jobs, pool, { maxConcurrentJobs: 4, maxAttempts: 3, retryDelayMs: 1 });
    scheduler.kick();
    expect(calls.map(([, id]) => id)).toEqual([1, 3]);
    await settle(scheduler);
    expect(overlaps).toEqual([]);
    expect(calls.filter(([, id]) => environmentOf.get(id) === 1).map(([, id]) => id)).toEqual([1, 2, 4]);
  });

  test("an intake for an environment that is busy does not ask the database for work; one for a free environment does", () => {
    const { jobs, pool, calls, pending, queries } = harness([{ environmentId: 1, jobId: 1 }], () => new Promise(() => {}));
    const scheduler = new JobScheduler(jobs, pool, { maxConcurrentJobs: 2, maxAttempts: 3, retryDelayMs: 1 });
    scheduler.kick();
    expect(queries.count).toBe(1);
    pending.push({ environmentId: 1, jobId: 2 });
    scheduler.accepted(2, 1, undefined);
    expect(queries.count).toBe(1);
    pending.push({ environmentId: 2, jobId: 3 });
    scheduler.accepted(3, 2, undefined);
    expect(queries.count).toBe(2);
    expect(calls).toEqual([["apply", 1], ["apply", 3]]);
  });

  test("respects the cap on jobs running at once", () => {
    const { jobs, pool, calls } = harness([1, 2, 3].map((n) => ({ environmentId: n, jobId: n })), () => new Promise(() => {}));
    new JobScheduler(jobs, pool, { maxConcurrentJobs: 2, maxAttempts: 3, retryDelayMs: 1 }).kick();
    expect(calls).toHaveLength(2);
  });

  test("a job whose worker crashed is retried, and the environment's next job waits for it", async () => {
    const { jobs, pool, calls } = harness(
      [{ environmentId: 1, jobId: 1 }, { environmentId: 1, jobId: 2 }],
      async (jobId, attempt) => {
        if (jobId === 1 && attempt === 1) throw new WorkerCrashed("worker exited");
      },
    );
    const errors: number[] = [];
    const scheduler = new JobScheduler(jobs, pool, { maxConcurrentJobs: 2, maxAttempts: 3, retryDelayMs: 1, onError: (jobId) => errors.push(jobId) });
    scheduler.kick();
    await settle(scheduler);
    expect(calls).toEqual([["apply", 1], ["apply", 1], ["apply", 2]]);
    expect(errors).toEqual([1]);
  });

  test("after a crash, the environment's jobs are applied one per run (a poison job is found alone) until its queue is empty", async () => {
    const { jobs, pool, calls, alone, pending } = harness(
      [{ environmentId: 1, jobId: 1 }, { environmentId: 1, jobId: 2 }, { environmentId: 1, jobId: 3 }],
      async (jobId, attempt) => {
        if (jobId === 1 && attempt === 1) throw new WorkerCrashed("worker exited");
      },
    );
    const scheduler = new JobScheduler(jobs, pool, { maxConcurrentJobs: 2, maxAttempts: 3, retryDelayMs: 1 });
    scheduler.kick();
    await settle(scheduler);
    expect(calls).toEqual([["apply", 1], ["apply", 1], ["apply", 2], ["apply", 3]]);
    expect(alone).toEqual([false, true, true, true]);
    // Its queue ran empty: the next job may take others along again.
    pending.push({ environmentId: 1, jobId: 4 });
    scheduler.kick();
    await settle(scheduler);
    expect(alone.at(-1)).toBe(false);
  });

  test("a full disk does not make an environment's runs single-job: it is not the jobs' fault", async () => {
    const { jobs, pool, alone } = harness([{ environmentId: 1, jobId: 1 }, { environmentId: 1, jobId: 2 }], async (jobId, attempt) => {
      if (jobId === 1 && attempt === 1) throw new TaskFailed("database or disk is full", "SQLITE_FULL");
    });
    const scheduler = new JobScheduler(jobs, pool, { maxConcurrentJobs: 2, maxAttempts: 3, retryDelayMs: 1 });
    scheduler.kick();
    await settle(scheduler);
    expect(alone).toEqual([false, false, false]);
  });

  test("a job that keeps crashing its worker is given up after maxAttempts, and the queue moves on", async () => {
    const { jobs, pool, calls } = harness(
      [{ environmentId: 1, jobId: 1 }, { environmentId: 1, jobId: 2 }],
      async (jobId) => {
        if (jobId === 1) throw new WorkerCrashed("worker exited");
      },
    );
    const scheduler = new JobScheduler(jobs, pool, { maxConcurrentJobs: 2, maxAttempts: 3, retryDelayMs: 1 });
    scheduler.kick();
    await settle(scheduler);
    expect(calls).toEqual([["apply", 1], ["apply", 1], ["apply", 1], ["giveUp", 1], ["apply", 2]]);
  });

  test("reports each start (with its attempt) and each finish once, given-up jobs included", async () => {
    const { jobs, pool } = harness(
      [{ environmentId: 1, jobId: 1 }, { environmentId: 1, jobId: 2 }, { environmentId: 2, jobId: 3 }],
      async (jobId, attempt) => {
        if (jobId === 1 && attempt === 1) throw new WorkerCrashed("worker exited");
        if (jobId === 3) throw new WorkerCrashed("poison");
      },
    );
    const started: Array<[number, number]> = [];
    const finished: Array<[number, string, number]> = [];
    const scheduler = new JobScheduler(jobs, pool, {
      maxConcurrentJobs: 2,
      maxAttempts: 2,
      retryDelayMs: 1,
      onStarted: (jobId, attempt) => started.push([jobId, attempt]),
      onFinished: (jobId, job, seconds) => finished.push([jobId, job.status, seconds]),
    });
    scheduler.kick();
    await settle(scheduler);
    expect(started.sort()).toEqual([[1, 1], [1, 2], [2, 1], [3, 1], [3, 2]]);
    expect(finished.map(([jobId, status]) => [jobId, status]).sort()).toEqual([[1, "Succeeded"], [2, "Succeeded"], [3, "Failed"]]);
    for (const [, , seconds] of finished) expect(seconds).toBeGreaterThan(0);
  });

  test("a full disk is waited out, however long: the job is retried, never given up, and its environment's next job waits", async () => {
    const { jobs, pool, calls } = harness(
      [{ environmentId: 1, jobId: 1 }, { environmentId: 1, jobId: 2 }],
      async (jobId, attempt) => {
        if (jobId === 1 && attempt <= 6) throw new TaskFailed("database or disk is full", "SQLITE_FULL");
      },
    );
    const finished: Array<[number, string]> = [];
    const scheduler = new JobScheduler(jobs, pool, { maxConcurrentJobs: 2, maxAttempts: 2, retryDelayMs: 1, onFinished: (jobId, job) => finished.push([jobId, job.status]) });
    scheduler.kick();
    await settle(scheduler);
    expect(calls).toEqual([...Array.from({ length: 7 }, (): [string, number] => ["apply", 1]), ["apply", 2]]);
    expect(finished).toEqual([[1, "Succeeded"], [2, "Succeeded"]]);
  });
});
