import { rmSync } from "node:fs";
import { loadConfig, type Config } from "../../src/config";
import { startServer, type RunningServer } from "../../src/server";
import { Access } from "../../src/access/access";
import { openStore } from "../../src/store/open";
import type { Job, JobQueue, Store } from "../../src/store/ports";
import { closeDatabase, openDatabase, writeTransaction, type Db } from "../../src/store/sqlite/database";
import { outboxRows } from "../../src/webhooks/outbox";
import { testBackend, testTls } from "./backend";
import { freshPostgresDatabase } from "./postgres-store";
import { testSql, type TestSql } from "./sql";
import { checkAnswersOf, stopChecking } from "./contract";
import { asset } from "./records";
import { tempDir } from "./temp-dirs";

/** Queues a job straight into the store, without an idempotency key (so it is always a new job). */
export async function enqueueJob(queue: JobQueue, environmentId: number, type: string, recordCount: number, body: Uint8Array): Promise<Job> {
  const [enqueued] = await queue.enqueue([{ environmentId, type, recordCount, body }]);
  if (enqueued!.conflict) throw new Error("unreachable without an idempotency key");
  return enqueued!.job;
}

export { tempDir };

/** Over TLS (TEST_TRANSPORT=tls), the settings that make a server the test starts serve the tests' certificate. */
export const testTlsConfig = (): Partial<Config> => (testTls ? { tlsCert: testTls.cert, tlsKey: testTls.key } : {});

export { testBackend };

export type TestServer = RunningServer & {
  dataDir: string;
  /** The server's PostgreSQL database, when on PostgreSQL (for the CLI's --database-url). */
  databaseUrl?: string;
  /** The first-run key of the `default` environment. */
  key: string;
  /** Base URL of the `default` environment, e.g. http://127.0.0.1:1234/default */
  base: string;
  logs: Array<Record<string, unknown>>;
  /** Runs SQL on the server's database from the side, as an operator would (`?` placeholders on both backends). */
  query<T = Record<string, unknown>>(text: string, ...params: unknown[]): Promise<T[]>;
  /** A second store on the same database, as the CLI would have. */
  store(): Promise<Store>;
  /** Creates an environment with one key, through the same code as the CLI. */
  addEnvironment(slug: string): Promise<{ slug: string; key: string; base: string }>;
  /**
   * A job put straight into the queue without waking the scheduler, so that it stays Pending while we look: on
   * PostgreSQL, where every instance rescans the queue, the test also holds the environment's lock (as a run in
   * progress elsewhere would) for `hold` ms, or until `release()` when `hold` is "until released": a test that
   * needs the job Pending until it says so must not bet on how long its own steps take.
   */
  parkJob(environmentSlug: string, hold?: number | "until released"): Promise<Job & { release(): Promise<void> }>;
  close(): Promise<void>;
};

const parkedForMs = 3_000;

/** A real server on a free port, with its own temp data directory (and on PostgreSQL, its own database). */
export async function startTestServer(overrides: Partial<Config> = {}): Promise<TestServer> {
  const dataDir = overrides.dataDir ?? tempDir();
  // A database of its own, unless the test brings one (to start a server on what an earlier one left).
  const database = testBackend === "postgres" && !overrides.databaseUrl ? await freshPostgresDatabase() : undefined;
  const databaseUrl = overrides.databaseUrl ?? database?.url;
  // No limit on wrong keys unless a test asks for one: many tests send wrong keys on purpose, all from 127.0.0.1.
  // One worker thread unless a test asks for more: each thread loads the job pipeline (a server starts in 450 ms of
  // CPU with one, 630 ms with two), and only a test about jobs running side by side (tests/jobs/processing's order,
  // tests/durability/contention, the large imports) needs a second one; those ask for it.
  const config = { ...loadConfig({}, {}), port: 0, host: "127.0.0.1", workers: 1, authFailuresPerMinute: 0, ...testTlsConfig(), ...overrides, dataDir, databaseUrl } as Config;
  const logs: Array<Record<string, unknown>> = [];
  const server = await startServer(Object.freeze(config), (entry) => logs.push(entry));
  // Whatever a test asks this server, the answer is checked against the server's OpenAPI document.
  checkAnswersOf(server.url);
  let side: Db | undefined;
  let sidePostgres: TestSql | undefined;
  let sideStore: Promise<Store> | undefined;
  const held: Array<{ release(): Promise<void>; timer?: ReturnType<typeof setTimeout> }> = [];
  const query = async <T>(text: string, ...params: unknown[]): Promise<T[]> => {
    if (databaseUrl) {
      sidePostgres ??= testSql(databaseUrl);
      let n = 0;
      return await sidePostgres.unsafe<T>(text.replace(/\?/g, () => `$${++n}`), params);
    }
    side ??= openDatabase(dataDir);
    // A write transaction as importd's store makes them, so that the server's caches see it (see read-cache.ts).
    const db = side;
    return writeTransaction(db, () => db.$client.query(text).all(...(params as never[])) as T[]);
  };
  const store = () => (sideStore ??= openStore(config, { outbox: outboxRows }));
  return {
    ...server,
    dataDir,
    databaseUrl,
    key: server.firstRunKey!,
    base: `${server.url}/default`,
    logs,
    query,
    store,
    async addEnvironment(slug) {
      const access = new Access((await store()).access);
      await access.createEnvironment(slug);
      const key = await access.createKey(slug);
      return { slug, key, base: `${server.url}/${slug}` };
    },
    async parkJob(environmentSlug, hold = parkedForMs) {
      const environmentId = (await query<{ id: number }>("SELECT id FROM environments WHERE slug = ?", environmentSlug))[0]!.id;
      let release = async () => {};
      if (databaseUrl) {
        // On a connection of its own, which holds the lock in an open transaction meanwhile.
        const holder = testSql(databaseUrl);
        await holder`BEGIN`;
        await holder`SELECT id FROM environments WHERE id = ${environmentId!} FOR NO KEY UPDATE`;
        let released: Promise<void> | undefined;
        release = () =>
          (released ??= (async () => {
            await holder`COMMIT`;
            await holder.end();
          })());
        held.push(hold === "until released" ? { release } : { release, timer: setTimeout(release, hold) });
      }
      const body = new TextEncoder().encode(JSON.stringify([asset(1)]));
      // Straight into the store, as another process would: nothing wakes this server's scheduler.
      return { ...(await enqueueJob((await store()).queue, environmentId!, "Asset", 1, body)), release };
    },
    async close() {
      stopChecking(server.url);
      // First, so that no run of the server's waits on a lock the test holds while the server stops.
      for (const hold of held) clearTimeout(hold.timer);
      await Promise.allSettled(held.map((hold) => hold.release()));
      await server.stop();
      await (await sideStore)?.close({ interrupted: true });
      if (side) closeDatabase(side);
      await sidePostgres?.end();
      // Its database is left to go with the test process's PostgreSQL server: nothing is connected to it any more,
      // and a DROP DATABASE costs the server some 140 ms of CPU (its files unlinked at a checkpoint), one a test server.
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
