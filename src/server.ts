import { Access } from "./access/access";
import { FailureLimiter, MemoryFailureLog } from "./access/failure-limiter";
import type { Config } from "./config";
import { buildApp } from "./http/app";
import { connectionIdleSeconds } from "./http/body";
import { ConsoleFiles } from "./http/console";
import { Listener } from "./http/listener";
import { clientAddressOf, rememberClientAddress, trustedProxies, type ProxyTrust } from "./http/client-address";
import { internalError } from "./http/problem";
import { pathOf, routable } from "./http/request-target";
import { answerHeaders, withHeaders } from "./http/security-headers";
import { retainedSince, type Services } from "./http/services";
import { RecordExports } from "./worker/exports";
import { IntakeService } from "./worker/intake-service";
import { UploadGate } from "./http/uploads";
import type { Log } from "./log";
import { Metrics } from "./observability/metrics";
import { checkReadiness } from "./observability/readiness";
import { observeRequests } from "./http/request-log";
import { tightenDataDirectory } from "./store/data-directory";
import { openStore } from "./store/open";
import { cachedJobs } from "./store/read-cache";
import { WorkerPool } from "./worker/pool";
import { JobScheduler } from "./worker/scheduler";
import { JobWaits } from "./jobs/job-waits";
import { operatorIdentity, ServingIdentity, warnIfPlainAndExposed, type ServedCertificate } from "./tls/serving-identity";
import { transportFor } from "./tls/transport";
import { outboxRows } from "./webhooks/outbox";
import { WebhookDispatcher } from "./webhooks/dispatcher";
import { WebhookSubscriptions } from "./webhooks/subscriptions";

export type RunningServer = {
  url: string;
  port: number;
  /** Set when this start created the `default` environment: its first key, shown once. */
  firstRunKey?: string;
  /** The certificate served over TLS; none for plain HTTP. */
  certificate?: ServedCertificate;
  /** Reads the certificate and key again and serves them to new connections, if they are good (SIGHUP). */
  reloadCertificate(trigger: "SIGHUP" | "files changed"): void;
  /** Request bodies in flight and the bytes reserved for them (http/uploads.ts). */
  bodiesInFlight(): { count: number; bytes: number };
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

/** An older importd, or a umask of 022, left the data directory readable by every user of the machine: no longer, and said. */
function tightenAndSay(dataDir: string, log: Log): void {
  const tightened = tightenDataDirectory(dataDir);
  if (tightened.changed.length > 0) {
    log({ level: "warn", msg: "took group and other permissions off the data directory and its files: they hold webhook signing secrets, key hashes and every environment's records, for importd's user alone", changed: tightened.changed });
  }
  if (tightened.failed.length > 0) {
    log({ level: "warn", msg: "the data directory holds files other users may read that are not importd's user's to change: give them to that user, or remove their group and other permissions (chmod go-rwx)", files: tightened.failed });
  }
}

/**
 * Every request's way from the listener to its answer: the client's address (the one a trusted proxy forwarded for),
 * the console's files or the API, the security headers on every answer, a log line and a count for each; and for
 * whatever escaped every handler (the app's own error handler included), a 500 that leaks nothing. `idle` resolves
 * once no request is being handled.
 */
function frontDoor(parts: { app: { fetch(request: Request): Response | Promise<Response> }; consoleFiles: ConsoleFiles; tls: boolean; isTrustedProxy: ProxyTrust; log: Log; metrics: Metrics }) {
  const { app, consoleFiles, isTrustedProxy, log } = parts;
  const headers = answerHeaders(parts.tls);
  const withOurHeaders = (answer: Response | Promise<Response>) => (answer instanceof Response ? withHeaders(answer, headers) : answer.then((response) => withHeaders(response, headers)));
  const requests = observeRequests((request) => {
    const path = pathOf(request.url);
    if (consoleFiles.serves(request.method, path)) return withOurHeaders(consoleFiles.fetch(request, path).then((answer) => answer ?? app.fetch(request)));
    return withOurHeaders(app.fetch(request));
  }, log, parts.metrics);
  return {
    fetch: (received: Request, bunServer: { requestIP(request: Request): { address: string } | null }) => {
      const request = routable(received);
      // Asked at once: once the client has closed the connection (a half-close after its request, say), Bun no
      // longer knows the address, and the request's log line must still name it.
      const peer = bunServer.requestIP(received)?.address ?? "unknown";
      rememberClientAddress(request, peer, () => clientAddressOf(peer, request.headers.get("x-forwarded-for"), isTrustedProxy));
      return requests.fetch(request);
    },
    error: (error: Error) => {
      try {
        log({ level: "error", msg: "unhandled error", error: String(error?.stack ?? error) });
      } catch {
        // The log itself failed: the answer must still go out.
      }
      return withHeaders(internalError().toResponse(), headers);
    },
    idle: () => requests.idle(),
  };
}

async function startBackups(config: Config, backupDir: string, log: Log, metrics: Metrics) {
  const { BackupSchedule } = await import("./store/sqlite/backup-schedule");
  const schedule = new BackupSchedule({
    dataDir: config.dataDir,
    backupDir,
    everyMs: config.backupEvery * 3_600_000,
    keep: config.backupKeep,
    // Resolved from src/, like the worker threads' entry: an extra entrypoint of the compiled binary.
    threadEntry: new URL("./store/sqlite/backup-thread.ts", import.meta.url),
    events: {
      succeeded: (file, report, { removed, problem }) => {
        metrics.backupSucceeded(new Date(), report.seconds);
        log({ msg: "backup taken", file, bytes: report.bytes, durationMs: Math.round(report.seconds * 1000), ...(removed.length > 0 ? { removedOld: removed } : {}) });
        if (problem) log({ level: "warn", msg: problem, backupDir });
      },
      failed: (file, message, retryInSeconds) => {
        metrics.backupFailed();
        log({ level: "error", msg: "backup failed; the server serves on, and tries again", file, error: message, retryInSeconds: Math.round(retryInSeconds) });
      },
    },
  });
  schedule.start();
  log({ msg: "scheduled backups", backupDir, everyHours: config.backupEvery, keep: config.backupKeep });
  return schedule;
}

/** Opens and migrates the store, recovers interrupted runs, starts the workers and the HTTP server. */
export async function startServer(config: Config, log: Log): Promise<RunningServer> {
  const transport = transportFor(config);
  // The operator's certificate is checked before anything is opened: a bad file is one line, and nothing else done.
  const given = operatorIdentity(transport);
  // Before anything else touches the database: on SQLite, a second server must not requeue the first one's
  // running jobs, so opening the store as a server takes the data directory for this process.
  const store = await openStore(config, { server: true, outbox: outboxRows });
  // Once the store is open: a data directory refused (another application's database, say) is that one line, and
  // left as it is.
  tightenAndSay(config.dataDir, log);
  const tls = transport.tls ? await ServingIdentity.start(config, transport, given, log).catch(async (error) => {
    await store.close();
    throw error;
  }) : undefined;
  warnIfPlainAndExposed(config, transport, log);
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
    lightLane: store.writesOneAtATime,
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
  // Webhook deliveries go out from here, beside the queue, never from a run's transaction.
  const deliveries = new WebhookDispatcher({ store: store.webhooks, allow: config.webhookAllow, log, retryScale: config.testHooks?.webhookRetryScale });
  const metrics = new Metrics(store.jobs, () => jobWaits.size, { environmentLabels: config.metricsEnvironmentLabels, backups: config.backupDir !== undefined });
  const scheduler = new JobScheduler(store.queue, pool, {
    maxConcurrentRuns: Math.max(1, config.workers - 1),
    retryDelayMs: 500,
    onError: (jobId, error) => log({ level: "warn", msg: "job attempt failed; will retry", jobId, error: String(error) }),
    onStarted: (jobId, attempt) => log({ msg: "job started", jobId, attempt }),
    onFinished: (jobId, job, seconds) => {
      jobWaits.finished([jobId]);
      deliveries.wake();
      metrics.jobFinished(job, seconds);
      log({ msg: "job finished", jobId, type: job.type, outcome: job.status, records: job.total, applied: job.applied, rejected: job.rejected, durationMs: Math.round(seconds * 1000) });
    },
  });
  // Other instances on a shared store queue work here too, and leave runs behind when they die.
  store.watch({
    work: () => scheduler.wake(),
    jobsFinished: (jobIds) => {
      jobWaits.finished(jobIds);
      deliveries.wake();
    },
    missed: () => jobWaits.wakeAll(),
    stalled: (stalled) => log({ level: "warn", msg: "ended the connections of a stalled instance; its runs will be taken over", ...stalled }),
    problem: (msg, error) => log({ level: "warn", msg, error: String(error) }),
  });
  let stopping: Promise<void> | undefined;
  const readiness = () => checkReadiness(store, pool, () => stopping !== undefined);
  const failedAuthentications = new FailureLimiter(config.authFailuresPerMinute, store.failures ?? new MemoryFailureLog());
  const intake = new IntakeService({ pool, scheduler, log });
  const uploads = new UploadGate({
    budgetBytes: config.bodyBudgetBytes,
    perEnvironment: config.uploadsPerEnvironment,
    maxBodyBytes: config.maxBodyBytes,
    stallSeconds: config.bodyStallSeconds,
    minBytesPerSecond: config.bodyMinBytesPerSecond,
  });
  const subscriptions = new WebhookSubscriptions({ store: store.webhooks, allow: config.webhookAllow, log });
  // Resolved from src/ like the worker threads' entry. An export thread writes nothing: it needs no thread number of
  // the pool's (SQLite's write-lock turn), and takes 0, which no pool thread has.
  const exports = new RecordExports({ entry: new URL("./worker/export-thread.ts", import.meta.url), store: store.handleFor(0), endThreadAfterChunks: config.testHooks?.exportThreadEndsAfterChunks });
  const services: Services = { config, log, access, failedAuthentications, intake, uploads, jobs: jobReads, queue: store.queue, jobWaits, records: store.records, exports, syncs: store.syncs, webhooks: store.webhooks, subscriptions, deliveries, metrics, readiness };

  const app = buildApp(services);
  const consoleFiles = ConsoleFiles.open();
  const isTrustedProxy = trustedProxies(config.trustedProxies);
  const requests = frontDoor({ app, consoleFiles, tls: transport.tls, isTrustedProxy, log, metrics });
  let server: Listener;
  try {
    server = Listener.open({
      fetch: requests.fetch,
      error: requests.error,
      // Never Bun's development page, which shows the working directory, source paths and a stack trace.
      development: false,
      port: config.port,
      hostname: config.host,
      // Our own limit is enforced in readBody, while reading, so that a chunked body is cut off too and every
      // 413 is Problem Details. Bun's limit would answer first with an empty 413, so it is set out of the way.
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      // Validating and storing a 100 MB batch takes a few seconds; keep the connection meanwhile. A body that stalls
      // or crawls is cut off long before this by readBody (--body-stall-seconds): this is the last resort.
      idleTimeout: connectionIdleSeconds,
    }, tls?.identity);
  } catch (error) {
    await consoleFiles.stop();
    await scheduler.stop();
    await pool.close();
    await store.close();
    throw new StartupError(listenFailure(error, config));
  }

  // Only once listening: a first key printed by a start that then failed would be shown once and never usable.
  const firstRunKey = await access.createFirstEnvironment("default");
  scheduler.wake();
  deliveries.start();

  // Scheduled backups, each in a thread of its own: the HTTP thread and the workers keep serving, /readyz stays ready.
  const backups = config.backupDir === undefined ? undefined : await startBackups(config, config.backupDir, log, metrics);

  const purge = () =>
    pool.run("purge", { before: retainedSince(config) }).then(
      ({ count }) => count > 0 && log({ msg: "purged expired job documents", count }),
      (error) => log({ level: "warn", msg: "purge failed", error: String(error) }),
    );
  void purge();
  const purgeTimer = setInterval(purge, purgeIntervalMs);

  // Renewed files (or a SIGHUP) are served to new connections.
  const reloadCertificate = (trigger: "SIGHUP" | "files changed") => {
    if (tls && !stopping) tls.reload(server, trigger);
    else if (!tls && trigger === "SIGHUP") log({ msg: "SIGHUP: serving plain HTTP, there is no TLS certificate to read again" });
  };
  const unwatch = tls?.watch(() => reloadCertificate("files changed")) ?? (() => {});

  const shownHost = config.host === "0.0.0.0" || config.host === "::" ? "localhost" : config.host.includes(":") && !config.host.startsWith("[") ? `[${config.host}]` : config.host;
  return {
    url: `${transport.tls ? "https" : "http"}://${shownHost}:${server.port}`,
    port: server.port,
    firstRunKey,
    certificate: tls?.certificate(),
    reloadCertificate,
    bodiesInFlight: () => uploads.inFlight(),
    stop: () =>
      (stopping ??= (async () => {
        unwatch();
        clearInterval(purgeTimer);
        if (backups?.stop().abandoned) log({ msg: "abandoned the backup under way; the next one removes its partial file" });
        // Held long polls are answered now, with the job as it is.
        jobWaits.stop();
        const deadline = Date.now() + config.shutdownTimeout * 1000;
        const untilDeadline = () => Bun.sleep(Math.max(0, deadline - Date.now()));
        // Stop listening; a request in flight (an upload, its intake) may still finish and get its answer.
        // Then close every connection, including those of clients still sending a body that was refused.
        void server.stop(false);
        await Promise.race([requests.idle(), untilDeadline()]);
        await server.stop(true);
        await consoleFiles.stop();
        await exports.close();
        // Start no job; let the running ones commit. Whoever stopped us is told what the wait is for.
        const running = scheduler.runningJobIds;
        if (running.length > 0) {
          const seconds = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
          const jobs = `${running.length === 1 ? "job" : "jobs"} ${running.join(", ")}`;
          log({ msg: `waiting for ${jobs} to finish, up to ${seconds} s; send the signal again (Ctrl-C) to stop now: ${running.length === 1 ? "it runs" : "they run"} again at the next start`, jobIds: running });
        }
        await Promise.race([scheduler.stop(), untilDeadline()]);
        // An attempt in flight ends within its 10 s; one cut short is made again (its claim runs out).
        await deliveries.stop(Math.max(0, deadline - Date.now()));
        const cut = await pool.close(Math.max(0, deadline - Date.now()));
        await store.close({ interrupted: cut > 0 });
        if (cut > 0) log({ level: "warn", msg: "stopped at the shutdown deadline: unfinished work was rolled back and runs again at the next start", tasks: cut });
        else log({ msg: "stopped cleanly" });
      })()),
  };
}
