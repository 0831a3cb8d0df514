import { Access } from "./access/access";
import { FailureLimiter, MemoryFailureLog } from "./access/failure-limiter";
import type { Config } from "./config";
import type { Server } from "bun";
import { buildApp } from "./http/app";
import { clientAddressOf, rememberClientAddress, trustedProxies } from "./http/client-address";
import { internalError } from "./http/problem";
import { routable } from "./http/request-target";
import { retainedSince, type Services } from "./http/services";
import { IntakeService } from "./jobs/intake-service";
import type { Log } from "./log";
import { Metrics } from "./observability/metrics";
import { checkReadiness } from "./observability/readiness";
import { observeRequests } from "./observability/requests";
import { openStore } from "./store/open";
import { cachedJobs } from "./store/read-cache";
import { WorkerPool } from "./worker/pool";
import { JobScheduler } from "./worker/scheduler";
import { JobWaits } from "./jobs/job-waits";

export type RunningServer = {
  url: string;
  port: number;
  /** Set when this start created the `default` environment: its first key, shown once. */
  firstRunKey?: string;
  stop(): Promise<void>;
};

/** The server could not start for a reason outside the configuration's syntax (a busy port, an unknown address). */
export class StartupError extends Error {
  // main tells it by name: it loads this module only to serve.
  override name = "StartupError";
}

function listenFailure(error: unknown, config: Config): string {
  const where = `${config.host}:${config.port}`;
  const code = (error as { code?: string })?.code;
  if (code === "EADDRINUSE") return `cannot listen on ${where}: the port is already in use. Stop the other process or choose another with --port (IMPORTD_PORT).`;
  if (code === "EADDRNOTAVAIL") return `cannot listen on ${where}: this machine has no such address. Choose another with --host (IMPORTD_HOST).`;
  if (code === "EACCES") return `cannot listen on ${where}: permission denied (ports below 1024 need privileges). Choose another with --port (IMPORTD_PORT).`;
  return `cannot listen on ${where}: ${(error as Error)?.message ?? error}`;
}

const purgeIntervalMs = 60 * 60 * 1000;

/** Opens and migrates the store, recovers interrupted runs, starts the workers and the HTTP server. */
export async function startServer(config: Config, log: Log): Promise<RunningServer> {
  // Before anything else touches the database: on SQLite, a second server must not requeue the first one's
  // running jobs, so opening the store as a server takes the data directory for this process.
  const store = await openStore(config, { server: true });
  // On SQLite, the lookups every request makes (its key, the job it polls) are answered from memory while
  // nothing was committed; elsewhere they go to the database each time.
  const access = new Access(store.access, store.commits);
  const jobReads = store.commits ? cachedJobs(store.jobs, store.commits) : store.jobs;

  const requeued = await store.queue.recoverInterrupted();
  if (requeued > 0) log({ msg: "requeued jobs interrupted by a previous stop", count: requeued });

  const pool = new WorkerPool({
    // Resolved from src/ so that it names the same file when run from source and inside the compiled
    // binary, where the worker is an extra entrypoint at /$bunfs/root/worker/thread.js.
    entry: new URL("./worker/thread.ts", import.meta.url),
    size: config.workers,
    stores: store,
    testHooks: config.testHooks,
    onCrash: (error) => log({ level: "warn", msg: "worker thread crashed; replaced", error: String(error) }),
  });
  try {
    await pool.ready();
  } catch (error) {
    await pool.close();
    await store.close();
    throw new StartupError((error as Error).message);
  }
  const jobWaits = new JobWaits();
  const metrics = new Metrics(store.jobs, () => jobWaits.size);
  const scheduler = new JobScheduler(store.queue, pool, {
    maxConcurrentRuns: Math.max(1, config.workers - 1),
    retryDelayMs: 500,
    onError: (jobId, error) => log({ level: "warn", msg: "job attempt failed; will retry", jobId, error: String(error) }),
    onStarted: (jobId, attempt) => log({ msg: "job started", jobId, attempt }),
    onFinished: (jobId, job, seconds) => {
      jobWaits.finished([jobId]);
      metrics.jobFinished(job, seconds);
      log({ msg: "job finished", jobId, type: job.type, outcome: job.status, records: job.total, applied: job.applied, rejected: job.rejected, durationMs: Math.round(seconds * 1000) });
    },
  });
  // Other instances on a shared store queue work here too, and leave runs behind when they die.
  store.watch({
    work: () => scheduler.wake(),
    jobsFinished: (jobIds) => jobWaits.finished(jobIds),
    missed: () => jobWaits.wakeAll(),
    stalled: (stalled) => log({ level: "warn", msg: "ended the connections of a stalled instance; its runs will be taken over", ...stalled }),
    problem: (msg, error) => log({ level: "warn", msg, error: String(error) }),
  });
  let stopping: Promise<void> | undefined;
  const readiness = () => checkReadiness(store, pool, () => stopping !== undefined);
  const failedAuthentications = new FailureLimiter(config.authFailuresPerMinute, store.failures ?? new MemoryFailureLog());
  const intake = new IntakeService({ pool, scheduler, log });
  const services: Services = { config, log, access, failedAuthentications, intake, jobs: jobReads, queue: store.queue, jobWaits, records: store.records, metrics, readiness };

  const app = buildApp(services);
  const requests = observeRequests(app.fetch, log, metrics);
  const isTrustedProxy = trustedProxies(config.trustedProxies);
  let server: Server<undefined>;
  try {
    server = Bun.serve({
      fetch: (received, bunServer) => {
        const request = routable(received);
        rememberClientAddress(request, () =>
          clientAddressOf(bunServer.requestIP(received)?.address ?? "unknown", request.headers.get("x-forwarded-for"), isTrustedProxy),
        );
        return requests.fetch(request);
      },
      // Whatever escaped every handler (the app's own error handler included). Never Bun's development page,
      // which shows the working directory, source paths and a stack trace.
      development: false,
      error: (error) => {
        try {
          log({ level: "error", msg: "unhandled error", error: String(error?.stack ?? error) });
        } catch {
          // The log itself failed: the answer must still go out.
        }
        return internalError().toResponse();
      },
      port: config.port,
      hostname: config.host,
      // Our own limit is enforced in readBody, while reading, so that a chunked body is cut off too and every
      // 413 is Problem Details. Bun's limit would answer first with an empty 413, so it is set out of the way.
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      // Validating and storing a 100 MB batch takes a few seconds; keep the connection meanwhile.
      idleTimeout: 255,
    });
  } catch (error) {
    await scheduler.stop();
    await pool.close();
    await store.close();
    throw new StartupError(listenFailure(error, config));
  }

  // Only once listening: a first key printed by a start that then failed would be shown once and never usable.
  const firstRunKey = await access.createFirstEnvironment("default");
  scheduler.wake();

  const purge = () =>
    pool.run("purge", { before: retainedSince(config) }).then(
      ({ count }) => count > 0 && log({ msg: "purged expired job documents", count }),
      (error) => log({ level: "warn", msg: "purge failed", error: String(error) }),
    );
  void purge();
  const purgeTimer = setInterval(purge, purgeIntervalMs);

  return {
    url: `http://${config.host === "0.0.0.0" ? "localhost" : config.host}:${server.port}`,
    port: server.port!,
    firstRunKey,
    stop: () =>
      (stopping ??= (async () => {
        clearInterval(purgeTimer);
        // Held long polls are answered now, with the job as it is.
        jobWaits.stop();
        const deadline = Date.now() + config.shutdownTimeout * 1000;
        const untilDeadline = () => Bun.sleep(Math.max(0, deadline - Date.now()));
        // Stop listening; a request in flight (an upload, its intake) may still finish and get its answer.
        // Then close every connection, including those of clients still sending a body that was refused.
        void server.stop(false);
        await Promise.race([requests.idle(), untilDeadline()]);
        await server.stop(true);
        // Start no job; let the running ones commit. Whoever stopped us is told what the wait is for.
        const running = scheduler.runningJobIds;
        if (running.length > 0) {
          const seconds = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
          const jobs = `${running.length === 1 ? "job" : "jobs"} ${running.join(", ")}`;
          log({ msg: `waiting for ${jobs} to finish, up to ${seconds} s; send the signal again (Ctrl-C) to stop now: ${running.length === 1 ? "it runs" : "they run"} again at the next start`, jobIds: running });
        }
        await Promise.race([scheduler.stop(), untilDeadline()]);
        const cut = await pool.close(Math.max(0, deadline - Date.now()));
        await store.close({ interrupted: cut > 0 });
        if (cut > 0) log({ level: "warn", msg: "stopped at the shutdown deadline: unfinished work was rolled back and runs again at the next start", tasks: cut });
        else log({ msg: "stopped cleanly" });
      })()),
  };
}
