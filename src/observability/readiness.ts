import type { Store } from "../store/ports";
import type { WorkerPool } from "../worker/pool";

export type ReadinessReport = {
  ready: boolean;
  checks: { database: boolean; migrations: boolean; workers: boolean; accepting: boolean };
  detail?: string;
  /** Something degraded that does not make the server unready. */
  warning?: string;
};

/** Whether this server can take imports now: what /readyz answers, and why not when it cannot. */
export async function checkReadiness(store: Pick<Store, "health">, pool: Pick<WorkerPool, "readyWorkers" | "size">, stopping: () => boolean): Promise<ReadinessReport> {
  let database = false;
  let migrations = false;
  let detail: string | undefined;
  let wakeUps: string | undefined;
  try {
    const health = await store.health();
    database = health.reachable;
    migrations = health.migrated;
    if (!migrations) detail = "the database has migrations left to apply";
    // Reported, not a reason to leave the load balancer: without notifications this instance still serves, and
    // finds queued work by its periodic scan, only later.
    if (health.wakeUps === false) wakeUps = "the connection that listens for other instances' notifications is down; queued work is found by the periodic scan until it is back";
  } catch (error) {
    detail = `the database cannot be read: ${(error as Error).message}`;
  }
  const workers = pool.readyWorkers === pool.size;
  if (!workers) detail ??= `${pool.readyWorkers} of ${pool.size} worker threads are up`;
  const accepting = !stopping();
  if (!accepting) detail ??= "the server is shutting down";
  const checks = { database, migrations, workers, accepting };
  return { ready: Object.values(checks).every(Boolean), checks, ...(detail ? { detail } : {}), ...(wakeUps ? { warning: wakeUps } : {}) };
}
