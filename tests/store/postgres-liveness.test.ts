import { afterAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { Access } from "../../src/access/access";
import { groupLimits } from "../../src/jobs/apply";
import type { StalledInstance, StoreEvents } from "../../src/store/ports";
import { PostgresStore } from "../../src/store/postgres/store";
import { outboxRows } from "../../src/webhooks/outbox";
import { requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { testSql, type TestSql } from "../helpers/sql";
import { lostConnection, statementInProgress } from "../helpers/statement-in-progress";

// How a serving instance finds another stalled, by its silent heartbeat, and ends its connections: the case
// PostgreSQL's idle_in_transaction_session_timeout cannot end, a transaction whose backend waits in the middle of
// a statement. Other instances are stood in for by rows of the instances table and connections named as an
// instance's are ("importd <id>"); a stalled one's connection holds an environment's lock while running pg_sleep:
// `active`, as a backend waiting for the rest of a statement is, never idle. A serving instance judges others only
// once it has beaten for 10 s without a gap, so each test waits that long.

if (requirePostgres("the PostgreSQL liveness tests")) {
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  async function database(timeout: string) {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const admin = connection(database.url, "importd tests");
    await admin.unsafe(`ALTER DATABASE "${new URL(database.url).pathname.slice(1)}" SET idle_in_transaction_session_timeout = '${timeout}'`);
    return { url: database.url, admin };
  }
  function connection(url: string, applicationName: string) {
    const sql = testSql(url, { applicationName });
    cleanups.push(() => sql.end());
    return sql;
  }
  async function serving(url: string) {
    const openedAt = Date.now();
    const store = await PostgresStore.open(url, { server: true, outbox: outboxRows });
    cleanups.push(() => store.close());
    const stalled: Array<StalledInstance & { afterMs: number }> = [];
    const problems: unknown[] = [];
    const events: StoreEvents = {
      work() {},
      jobsFinished() {},
      missed() {},
      stalled: (instance) => stalled.push({ ...instance, afterMs: Date.now() - openedAt }),
      problem: (_, error) => problems.push(error),
    };
    store.watch(events);
    return { store, stalled, problems };
  }

  /**
   * Another instance, its heartbeat kept `silentSeconds` old (none: no row), with one connection in the middle of a
   * statement, holding `lockEnvironment`'s lock if given.
   */
  async function instance(url: string, admin: TestSql, silentSeconds: number | undefined, lockEnvironment?: number) {
    const id = randomUUID();
    if (silentSeconds !== undefined) {
      const keep = () => admin`
        INSERT INTO instances (id, heartbeat_at) VALUES (${id}, now() - ${silentSeconds}::float8 * interval '1 second')
        ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`;
      await keep();
      const keeping = setInterval(() => void keep().catch(() => {}), 300);
      cleanups.push(() => clearInterval(keeping));
    }
    return { id, ...(await busy(url, admin, `importd ${id}`, lockEnvironment)) };
  }

  /** A connection named `applicationName` in the middle of a statement (and of a transaction holding a lock). */
  async function busy(url: string, admin: TestSql, applicationName: string, lockEnvironment?: number) {
    const connection = await statementInProgress(url, admin, applicationName, lockEnvironment);
    cleanups.push(connection.end);
    return connection;
  }

  const within = async (ms: number, done: () => Promise<boolean> | boolean) => {
    const until = Date.now() + ms;
    while (!(await done())) {
      if (Date.now() > until) return false;
      await Bun.sleep(50);
    }
    return true;
  };

  test("an instance silent past the limit has its connections ended mid-statement, freeing its environment; live instances, CLI commands and other programs are left alone", async () => {
    // The limit here: the timeout of 1.5 s, raised to the floor of 10 s.
    const { url, admin } = await database("1500ms");
    const { store, stalled, problems } = await serving(url);
    const environment = await new Access(store.access).createEnvironment("one");
    const [queued] = await store.queue.enqueue([{ environmentId: environment.id, type: "SubArea", recordCount: 1, body: new TextEncoder().encode('[{"id":"x","name":"X"}]') }]);
    const stalledAnHour = await instance(url, admin, 3_600, environment.id);
    const stalledFifteen = await instance(url, admin, 15);
    const left = {
      live: await instance(url, admin, 0),
      silentFive: await instance(url, admin, 5),
      // No row: an instance starting (it writes its row before it runs anything), or unknown.
      unknown: await instance(url, admin, undefined),
      cli: await busy(url, admin, "importd"),
      other: await busy(url, admin, "psql"),
    };
    const goneId = randomUUID();
    const recentId = randomUUID();
    await admin`INSERT INTO instances (id, heartbeat_at) VALUES (${goneId}, now() - interval '2 hours'), (${recentId}, now() - interval '30 minutes')`;
    // Held: nothing to claim while the stalled instance's statement waits.
    expect(await store.queue.claimRun({ token: "t0", environmentId: environment.id }, groupLimits)).toBeUndefined();

    expect(await within(20_000, () => stalled.length >= 2)).toBe(true);
    expect(stalled.map((found) => found.instance).sort()).toEqual([stalledAnHour.id, stalledFifteen.id].sort());
    for (const found of stalled) {
      expect(found).toMatchObject({ connections: 1, address: expect.any(String) });
      // Not before this instance had beaten for 10 s itself.
      expect(found.afterMs).toBeGreaterThanOrEqual(10_000);
    }
    expect(stalled.find((found) => found.instance === stalledAnHour.id)!.silentMs).toBeGreaterThanOrEqual(3_599_000);
    expect(await stalledAnHour.ended).toBe(lostConnection);
    expect(await stalledFifteen.ended).toBe(lostConnection);
    const run = await store.queue.claimRun({ token: "t1", environmentId: environment.id }, groupLimits);
    expect(run?.jobs.map((job) => job.id)).toEqual([queued!.conflict ? 0 : queued!.job.id]);
    await store.queue.abandonRun(run!);

    // Judged in the same statement as the stalled, and left alone.
    for (const [name, connection] of Object.entries(left)) expect([name, await connection.alive()]).toEqual([name, true]);
    // Long gone, with no connection: forgotten. Silent for 30 minutes: kept.
    expect((await admin`SELECT id FROM instances WHERE id IN (${goneId}, ${recentId})`).map((row) => row.id)).toEqual([recentId]);
    // This instance: its row kept fresh, its own connections carrying its id.
    const standIns = [stalledAnHour.id, stalledFifteen.id, left.live.id, left.silentFive.id, recentId];
    const [own, ...more] = await admin`SELECT id, extract(epoch FROM now() - heartbeat_at) AS age FROM instances WHERE id <> ALL(${standIns})`;
    expect(more).toEqual([]);
    expect(Number(own!.age)).toBeLessThan(6);
    const ownConnections = await admin`SELECT count(*)::int AS count FROM pg_stat_activity WHERE application_name = ${`importd ${own!.id}`}`;
    expect(ownConnections[0]!.count).toBeGreaterThanOrEqual(2);
    expect(problems).toEqual([]);

    // Stopped, it removes its row: gone, not stalled.
    await store.close();
    expect((await admin`SELECT id FROM instances WHERE id = ${own!.id as string}`).length).toBe(0);
  }, 40_000);

  test("where idle_in_transaction_session_timeout is not set, the limit is 60 s", async () => {
    const { url, admin } = await database("0");
    const { stalled } = await serving(url);
    const fortyFive = await instance(url, admin, 45);
    const seventyFive = await instance(url, admin, 75);
    expect(await within(16_000, () => stalled.length > 0)).toBe(true);
    expect(stalled.map((found) => found.instance)).toEqual([seventyFive.id]);
    expect(await seventyFive.ended).toBe(lostConnection);
    expect(await fortyFive.alive()).toBe(true);
  }, 40_000);

  test("a heartbeat that cannot be written is told as a problem, and the instance goes on", async () => {
    const { url, admin } = await database("0");
    const { store, problems } = await serving(url);
    await admin`ALTER TABLE instances RENAME TO instances_away`;
    expect(await within(5_000, () => problems.length > 0)).toBe(true);
    expect(String(problems[0])).toContain("instances");
    await admin`ALTER TABLE instances_away RENAME TO instances`;
    expect((await store.health()).reachable).toBe(true);
  }, 15_000);
}
