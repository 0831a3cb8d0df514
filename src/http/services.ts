import type { FailureLimiter } from "../access/failure-limiter";
import type { AccessRepository } from "../access/repository";
import type { Config } from "../config";
import type { Log } from "../log";
import type { JobRepository } from "../jobs/repository";
import type { Metrics } from "../observability/metrics";
import type { ReadinessReport } from "../observability/readiness";
import type { RecordStore } from "../resources/store";
import type { WorkerPool } from "../worker/pool";
import type { JobScheduler } from "../worker/scheduler";

/** What the HTTP layer is handed; built in serve, so that tests build their own. */
export type Services = {
  config: Config;
  log: Log;
  access: AccessRepository;
  failedAuthentications: FailureLimiter;
  jobs: JobRepository;
  stores: ReadonlyMap<string, RecordStore>;
  pool: WorkerPool;
  scheduler: JobScheduler;
  metrics: Metrics;
  readiness: () => ReadinessReport;
};

/** Job documents older than this (by completion) are treated as gone. */
export const retainedSince = (config: Config) =>
  new Date(Date.now() - config.jobRetentionDays * 86_400_000).toISOString();
