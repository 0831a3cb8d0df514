import { afterAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import postgres from "postgres";
import { Access } from "../../src/access/access";
import { groupLimits } from "../../src/jobs/apply";
import type { StalledInstance, StoreEvents } from "../../src/store/ports";
import { PostgresStore } from "../../src/store/postgres/store";
import { requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";

// How a serving instance finds another stalled, by its silent heartbeat, and ends its connections: the case
// PostgreSQL's idle_in_transaction_session_timeout cannot end, a transaction whose backend waits in the middle of
// a statement. A stalled instance is stood in for by connections named as an instance's are ("importd <id>"),
// one holding an environment's lock while running pg_sleep: `active`, as a backend waiting for the rest of a
// statement is, never idle.

if (requirePostgres("the PostgreSQL liveness tests")) {
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  async function database(timeout?: string) {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const admin = connection(database.url, "importd tests");
    if (timeout) await admin.unsafe(`ALTER DATABASE "${new URL(database.url).pathname.slice(1)}" SET idle_in_transaction_session_timeout = '${timeout}'`);
    return { url: database.url, admin };
  }
  function connection(url: string, applicationName: string) {
    const sql = postgres(url, { max: 1, onnotice: () => {}, connection: { application_name: applicationName } });
    cleanups.push(() => sql.end({ timeout: 0 }));
    return sql;
  }
  async function serving(url: string) {
    const store = await PostgresStore.open(url, { server: true });
    cleanups.push(() => store.close());
    const stalled: StalledInstance[] = [];
    const problems: unknown[] = [];
    const events: StoreEvents = { work() {}, jobsFinished() {}, missed() {}, stalled: (instance) => stalled.push(instance), problem: (_, error) => problems.push(error) };
    store.watch(events);
    return { store, stalled, problems };
  }
  /** An instance that wrote its heartbeat `silentSeconds` ago and is silent since: one connection, holding `lockEnvironment`'s lock mid-statement. */
  async function stalledInstance(url: string, admin: postgres.Sql, silentSeconds: number, lockEnvironment?: number) {
    const id = randomUUID();
    await admin`INSERT INTO instances (id, heartbeat_at) VALUES (${id}, now() - ${silentSeconds} * interval '1 second')`;
    const sql = connection(url, `importd ${id}`);
    const pid = ((await sql`SELECT pg_backend_pid() AS pid`)[0]!.pid as number);
    // One simple query, so that nothing more is sent after it fails (postgres.js's begin() would send a ROLLBACK
    // on the ended connection, which throws from a timer).
    const lock = lockEnvironment === undefined ? "" : `SELECT id FROM environments WHERE id = ${lockEnvironment} FOR NO KEY UPDATE;`;
    const ended = outcome(sql.unsafe(`BEGIN; ${lock} SELECT pg_sleep(600)`));
    for (let tries = 0; (await admin`SELECT state FROM pg_stat_activity WHERE pid = ${pid}`)[0]?.state !== "active"; tries++) {
      if (tries > 200) throw new Error("the stand-in never started its statement");
      await Bun.sleep(10);
    }
    return { id, pid, ended, alive: async () => (await admin`SELECT 1 FROM pg_stat_activity WHERE pid = ${pid}`).length === 1 };
  }
  /** How a statement ended: "finished", or its error's code (a connection ended by PostgreSQL: lostConnection). */
  const outcome = (statement: Promise<unknown>) =>
    statement.then(
      () => "finished",
      (error: { code?: string }) => (error.code === "57P01" || error.code === "CONNECTION_CLOSED" ? lostConnection : (error.code ?? String(error))),
    );
  const lostConnection = "ended by PostgreSQL";
  const within = async (ms: number, done: () => Promise<boolean> | boolean) => {
    const until = Date.now() + ms;
    while (!(await done())) {
      if (Date.now() > until) return false;
      await Bun.sleep(50);
    }
    return true;
  };

  test("an instance silent past the limit has its connections ended mid-statement: its environment's lock is freed and its job taken over", async () => {
    const { url, admin } = await database();
    const { store, stalled, problems } = await serving(url);
    const environment = await new Access(store.access).createEnvironment("one");
    const [queued] = await store.queue.enqueue([{ environmentId: environment.id, type: "SubArea", recordCount: 1, body: new TextEncoder().encode('[{"id":"x","name":"X"}]') }]);
    const stand = await stalledInstance(url, admin, 3_600, environment.id);
    // Held: nothing to claim while the stalled instance's statement waits.
    expect(await store.queue.claimRun({ token: "t0", environmentId: environment.id }, groupLimits)).toBeUndefined();

    expect(await within(6_000, () => stalled.length > 0)).toBe(true);
    expect(stalled).toEqual([{ instance: stand.id, address: "127.0.0.1", silentMs: expect.any(Number), connections: 1 }]);
    expect(stalled[0]!.silentMs).toBeGreaterThanOrEqual(3_600_000);
    expect(await stand.ended).toBe(lostConnection);
    const run = await store.queue.claimRun({ token: "t1", environmentId: environment.id }, groupLimits);
    expect(run?.jobs.map((job) => job.id)).toEqual([queued!.conflict ? 0 : queued!.job.id]);
    await store.queue.abandonRun(run!);
    expect(problems).toEqual([]);
  }, 20_000);

  test("live instances, CLI commands and other programs are left alone, and the serving instance's own heartbeat stays fresh", async () => {
    const { url, admin } = await database();
    const { store, stalled, problems } = await serving(url);
    // Live: its heartbeat kept fresh meanwhile, as a running instance's is.
    const live = await stalledInstance(url, admin, 0);
    const keepAlive = setInterval(() => void admin`UPDATE instances SET heartbeat_at = now() WHERE id = ${live.id}`.catch(() => {}), 500);
    cleanups.push(() => clearInterval(keepAlive));
    // Silent, but with no row: an instance starting (it writes its row before it runs anything), or unknown.
    const unknownId = randomUUID();
    const unknown = connection(url, `importd ${unknownId}`);
    const cli = connection(url, "importd");
    const other = connection(url, "psql");
    const sleeping = [unknown, cli, other].map((sql) => outcome(sql`SELECT pg_sleep(600)`));
    await Bun.sleep(5_000);

    expect(stalled).toEqual([]);
    expect(await live.alive()).toBe(true);
    const names = (await admin`SELECT application_name AS name FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()`).map((row) => row.name as string);
    expect(names.sort()).toEqual([`importd ${live.id}`, `importd ${unknownId}`, "importd", "psql"].sort());
    // The serving instance: its row written at start-up and kept fresh; its own connections carry its id.
    const [own] = await admin`SELECT id, extract(epoch FROM now() - heartbeat_at) AS age FROM instances WHERE id NOT IN (${live.id})`;
    expect(Number(own!.age)).toBeLessThan(3);
    const ownConnections = await admin`SELECT count(*)::int AS count FROM pg_stat_activity WHERE application_name = ${`importd ${own!.id}`}`;
    expect(ownConnections[0]!.count).toBeGreaterThanOrEqual(2);
    expect(problems).toEqual([]);

    // Stopped, it removes its row: gone, not stalled.
    await store.close();
    expect((await admin`SELECT id FROM instances WHERE id = ${own!.id as string}`).length).toBe(0);
    await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()`;
    expect(await Promise.all(sleeping)).toEqual([lostConnection, lostConnection, lostConnection]);
  }, 20_000);

  test("the limit is idle_in_transaction_session_timeout, but never under 10 s, and 60 s where it is not set", async () => {
    // Set to 1.5 s: an instance silent for 5 s is not yet stalled, one silent for 15 s is.
    {
      const { url, admin } = await database("1500ms");
      const { stalled } = await serving(url);
      const five = await stalledInstance(url, admin, 5);
      const fifteen = await stalledInstance(url, admin, 15);
      expect(await within(6_000, () => stalled.length > 0)).toBe(true);
      expect(stalled.map((instance) => instance.instance)).toEqual([fifteen.id]);
      expect(await fifteen.ended).toBe(lostConnection);
      expect(await five.alive()).toBe(true);
    }
    // Not set: silent for 45 s is not stalled, 75 s is.
    {
      const { url, admin } = await database();
      const { stalled } = await serving(url);
      const fortyFive = await stalledInstance(url, admin, 45);
      const seventyFive = await stalledInstance(url, admin, 75);
      expect(await within(6_000, () => stalled.length > 0)).toBe(true);
      expect(stalled.map((instance) => instance.instance)).toEqual([seventyFive.id]);
      expect(await seventyFive.ended).toBe(lostConnection);
      expect(await fortyFive.alive()).toBe(true);
    }
  }, 30_000);

  test("the rows of instances gone for an hour, with no connection left, are deleted; newer ones are kept", async () => {
    const { url, admin } = await database();
    const goneId = randomUUID();
    await admin`INSERT INTO instances (id, heartbeat_at) VALUES (${goneId}, now() - interval '2 hours')`;
    await admin`INSERT INTO instances (id, heartbeat_at) VALUES (${randomUUID()}, now() - interval '30 minutes')`;
    await serving(url);
    expect(await within(6_000, async () => (await admin`SELECT 1 FROM instances WHERE id = ${goneId}`).length === 0)).toBe(true);
    expect((await admin`SELECT count(*)::int AS count FROM instances`)[0]!.count).toBe(2);
  }, 20_000);
}
