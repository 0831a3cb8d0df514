import { migrationsApplied, type Db } from "../db/client";
import type { WorkerPool } from "../worker/pool";

export type ReadinessReport = {
  ready: boolean;
  checks: { database: boolean; migrations: boolean; workers: boolean; accepting: boolean };
  detail?: string;
};

/** Whether this server can take imports now: what /readyz answers, and why not when it cannot. */
export function checkReadiness(db: Db, pool: WorkerPool, stopping: () => boolean): ReadinessReport {
  let database = false;
  let migrations = false;
  let detail: string | undefined;
  try {
    db.$client.query("SELECT 1").get();
    database = true;
    migrations = migrationsApplied(db);
    if (!migrations) detail = "the database has migrations left to apply";
  } catch (error) {
    detail = `the database cannot be read: ${(error as Error).message}`;
  }
  const workers = pool.readyWorkers === pool.size;
  if (!workers) detail ??= `${pool.readyWorkers} of ${pool.size} worker threads are up`;
  const accepting = !stopping();
  if (!accepting) detail ??= "the server is shutting down";
  const checks = { database, migrations, workers, accepting };
  return { ready: Object.values(checks).every(Boolean), checks, ...(detail ? { detail } : {}) };
}
