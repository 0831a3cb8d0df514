import { AccessRepository } from "./access/repository";
import type { Config } from "./config";
import { closeDatabase, migrate, openDatabase } from "./db/client";
import { buildApp } from "./http/app";
import { retainedSince, type Services } from "./http/services";
import { JobRepository } from "./jobs/repository";
import type { Log } from "./log";
import { resources } from "./resources/registry";
import { RecordStore } from "./resources/store";
import { WorkerPool } from "./worker/pool";
import { JobScheduler } from "./worker/scheduler";

export type RunningServer = {
  url: string;
  port: number;
  /** Set when this start created the `default` environment: its first key, shown once. */
  firstRunKey?: string;
  stop(): Promise<void>;
};

const purgeIntervalMs = 60 * 60 * 1000;

/** Opens and migrates the database, recovers interrupted jobs, starts the workers and the HTTP server. */
export async function startServer(config: Config, log: Log): Promise<RunningServer> {
  const db = openDatabase(config.dataDir);
  migrate(db);
  const access = new AccessRepository(db);
  const jobs = new JobRepository(db);

  let firstRunKey: string | undefined;
  if (access.listEnvironments().length === 0) {
    access.createEnvironment("default");
    firstRunKey = access.createKey("default");
  }
  const requeued = jobs.requeueInterrupted();
  if (requeued > 0) log({ msg: "requeued jobs interrupted by a previous stop", count: requeued });

  const pool = new WorkerPool(config.workers, config.dataDir, (error) => log({ level: "warn", msg: "worker thread crashed; replaced", error: String(error) }));
  await pool.ready();
  const scheduler = new JobScheduler(jobs, pool, {
    maxConcurrentJobs: Math.max(1, config.workers - 1),
    maxAttempts: 3,
    retryDelayMs: 500,
    onError: (jobId, error) => log({ level: "warn", msg: "job attempt failed; will retry", jobId, error: String(error) }),
  });
  const stores = new Map(resources.map((resource) => [resource.path, new RecordStore(db, resource)]));
  const services: Services = { config, access, jobs, stores, pool, scheduler };

  const app = buildApp(services, log).listen({
    port: config.port,
    hostname: config.host,
    // Our own limit is enforced while reading (so a chunked body is cut off too) and answered as Problem Details.
    maxRequestBodySize: config.maxBodyBytes + 1024 * 1024,
    // Validating and storing a 100 MB batch takes a few seconds; keep the connection meanwhile.
    idleTimeout: 255,
  });
  const server = app.server!;
  scheduler.kick();

  const purge = () =>
    pool.run("purge", { before: retainedSince(config) }).then(
      ({ count }) => count > 0 && log({ msg: "purged expired job documents", count }),
      (error) => log({ level: "warn", msg: "purge failed", error: String(error) }),
    );
  void purge();
  const purgeTimer = setInterval(purge, purgeIntervalMs);

  let stopping: Promise<void> | undefined;
  return {
    url: `http://${config.host === "0.0.0.0" ? "localhost" : config.host}:${server.port}`,
    port: server.port!,
    firstRunKey,
    stop: () =>
      (stopping ??= (async () => {
        clearInterval(purgeTimer);
        await server.stop(true);
        await scheduler.stop();
        await pool.close();
        closeDatabase(db);
      })()),
  };
}
