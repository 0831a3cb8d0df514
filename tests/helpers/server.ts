import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { formatKey, hashSecret, newSecret } from "../../src/access/api-key";
import { loadConfig, type Config } from "../../src/config";
import { startServer, type RunningServer } from "../../src/server";
import type { Job, JobQueue } from "../../src/store/ports";
import { closeDatabase, openDatabase, type Db } from "../../src/store/sqlite/database";
import { toJob } from "../../src/store/job-row";
import { sql } from "drizzle-orm";
import { apiKeys, environments, jobPayloads, jobs, jobSequences } from "../../src/store/sqlite/schema";
import { SqliteStore } from "../../src/store/sqlite/store";
import { asset } from "./records";

/** Queues a job straight into the store, without an idempotency key (so it is always a new job). */
export async function enqueueJob(queue: JobQueue, environmentId: number, type: string, recordCount: number, body: Uint8Array): Promise<Job> {
  const [enqueued] = await queue.enqueue([{ environmentId, type, recordCount, body }]);
  if (enqueued!.conflict) throw new Error("unreachable without an idempotency key");
  return enqueued!.job;
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
  /** A second store on the same data directory, as the CLI would have. */
  store(): SqliteStore;
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
  let sideStore: SqliteStore | undefined;
  const db = () => (side ??= openDatabase(dataDir));
  return {
    ...server,
    dataDir,
    key: server.firstRunKey!,
    base: `${server.url}/default`,
    logs,
    db,
    store: () => (sideStore ??= SqliteStore.open(dataDir)),
    // Written straight into the database (synchronously, for the tests' convenience), as the CLI would store them.
    addEnvironment(slug) {
      const createdAt = new Date().toISOString();
      const environment = db().insert(environments).values({ slug, createdAt }).returning().get();
      const secret = newSecret();
      const { id } = db().insert(apiKeys).values({ environmentId: environment.id, secretHash: hashSecret(secret), createdAt }).returning({ id: apiKeys.id }).get();
      return { slug, key: formatKey(secret, id), base: `${server.url}/${slug}` };
    },
    parkJob(environmentSlug) {
      const environment = db().query.environments.findFirst({ where: (e, { eq }) => eq(e.slug, environmentSlug) }).sync()!;
      const body = new TextEncoder().encode(JSON.stringify([asset(1)]));
      const { sequence } = db()
        .insert(jobSequences)
        .values({ environmentId: environment.id, lastSequence: 1 })
        .onConflictDoUpdate({ target: jobSequences.environmentId, set: { lastSequence: sql`${jobSequences.lastSequence} + 1` } })
        .returning({ sequence: jobSequences.lastSequence })
        .get();
      const job = db().insert(jobs).values({ environmentId: environment.id, type: "Asset", status: "Pending", recordCount: 1, createdAt: new Date().toISOString(), sequence }).returning().get();
      db().insert(jobPayloads).values({ jobId: job.id, body: Buffer.from(body) }).run();
      return toJob(job);
    },
    async close() {
      await server.stop();
      await sideStore?.close({ interrupted: true });
      if (side) closeDatabase(side);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
