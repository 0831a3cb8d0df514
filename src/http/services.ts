import type { Access } from "../access/access";
import type { FailureLimiter } from "../access/failure-limiter";
import type { Config } from "../config";
import type { RecordExports } from "../worker/exports";
import type { IntakeService } from "../worker/intake-service";
import type { JobWaits } from "../jobs/job-waits";
import type { Log } from "../log";
import type { Metrics } from "../observability/metrics";
import type { ReadinessReport } from "../observability/readiness";
import type { JobQueue, JobReads, RecordReads, SyncStore, WebhookStore } from "../store/ports";
import type { WebhookSubscriptions } from "../webhooks/subscriptions";
import type { UploadGate } from "./uploads";

/** What the HTTP layer is handed; built in server.ts, so that tests build their own. */
export type Services = {
  config: Config;
  log: Log;
  access: Access;
  failedAuthentications: FailureLimiter;
  intake: IntakeService;
  /** Request bodies in flight: the server's budget and each environment's share. */
  uploads: UploadGate;
  jobs: JobReads;
  queue: Pick<JobQueue, "cancel">;
  jobWaits: JobWaits;
  records: RecordReads;
  /** Exports, each read in a thread of its own. */
  exports: RecordExports;
  /** Syncs (mirrors): opened and read here; their imports and completions go through `intake`. */
  syncs: SyncStore;
  webhooks: WebhookStore;
  /** Subscribing and pinging, by the subscription rules. */
  subscriptions: WebhookSubscriptions;
  /** Tells the webhook dispatcher that a delivery may be due now (a job was canceled here). */
  deliveries: { wake(): void };
  metrics: Metrics;
  readiness: () => Promise<ReadinessReport>;
};

/** Job documents older than this (by completion) are treated as gone. */
export const retainedSince = (config: Config) =>
  new Date(Date.now() - config.jobRetentionDays * 86_400_000).toISOString();
