import { Access } from "../../src/access/access";
import { runNext, type RunOptions } from "../../src/jobs/apply";
import type { JobQueue } from "../../src/store/ports";
import { SqliteStore } from "../../src/store/sqlite/store";
import { outboxRows } from "../../src/webhooks/outbox";
import { tempDir } from "./server";

/** A fresh SQLite store in a temp directory, with environments of these slugs (ids from 1, in this order). */
export async function sqliteStoreWith(...slugs: string[]): Promise<SqliteStore> {
  const store = SqliteStore.open(tempDir(), { outbox: outboxRows });
  const access = new Access(store.access);
  for (const slug of slugs) await access.createEnvironment(slug);
  return store;
}

/** Runs the environment's next run as a worker thread would, with a fresh token; [] when there was none. */
export const runEnvironment = async (queue: JobQueue, environmentId: number, options: Omit<RunOptions, "token"> = {}) =>
  (await runNext(queue, environmentId, { token: crypto.randomUUID(), ...options })) ?? [];
