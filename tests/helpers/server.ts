import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AccessRepository } from "../../src/access/repository";
import { loadConfig, type Config } from "../../src/config";
import { closeDatabase, openDatabase, type Db } from "../../src/db/client";
import { JobRepository, type Job } from "../../src/jobs/repository";
import { startServer, type RunningServer } from "../../src/server";
import { asset } from "./records";

/** Queues a job straight into the database, without an idempotency key (so it is always a new job). */
export function enqueueJob(jobs: JobRepository, environmentId: number, type: string, recordCount: number, body: Uint8Array): Job {
  const enqueued = jobs.enqueue(environmentId, type, recordCount, body);
  if (enqueued.conflict) throw new Error("unreachable without an idempotency key");
  return enqueued.job;
}

export const tempDir = (prefix = "importd-test-") => mkdtempSync(join(tmpdir(), prefix));

export type TestServer = RunningServer & {
  dataDir: string;
  /** The first-run key of the `default` environment. */
  key: string;
  /** Base URL of the `default` environment, e.g. http://127.0.0.1:1234/default */
  base: string;
  logs: Array<Record<string, unknown>>;
  /** A second connection to the same database file, as the CLI would have. */
  db(): Db;
  /** Creates an environment with one key, through the same code as the CLI. */
  addEnvironment(slug: string): { slug: string; key: string; base: string };
  /** A job put straight into the queue without waking the scheduler, so it stays Pending while we look. */
  parkJob(environmentSlug: string): Job;
  close(): Promise<void>;
};

/** A real server on a free port, with its own temp data directory. */
export async function startTestServer(overrides: Partial<Config> = {}): Promise<TestServer> {
  const dataDir = overrides.dataDir ?? tempDir();
  // No limit on wrong keys unless a test asks for one: many tests send wrong keys on purpose, all from 127.0.0.1.
  const config = { ...loadConfig({}, {}), port: 0, host: "127.0.0.1", workers: 2, authFailuresPerMinute: 0, ...overrides, dataDir } as Config;
  const logs: Array<Record<string, unknown>> = [];
  const server = await startServer(Object.freeze(config), (entry) => logs.push(entry));
  let side: Db | undefined;
  const db = () => (side ??= openDatabase(dataDir));
  return {
    ...server,
    dataDir,
    key: server.firstRunKey!,
    base: `${server.url}/default`,
    logs,
    db,
    addEnvironment(slug) {
      const access = new AccessRepository(db());
      access.createEnvironment(slug);
      return { slug, key: access.createKey(slug), base: `${server.url}/${slug}` };
    },
    parkJob(environmentSlug) {
      const environment = db().query.environments.findFirst({ where: (e, { eq }) => eq(e.slug, environmentSlug) }).sync()!;
      const body = new TextEncoder().encode(JSON.stringify([asset(1)]));
      return enqueueJob(new JobRepository(db()), environment.id, "Asset", 1, body);
    },
    async close() {
      await server.stop();
      if (side) closeDatabase(side);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
