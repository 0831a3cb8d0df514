import { afterAll, expect, test } from "bun:test";
import { Access } from "../../src/access/access";
import { groupLimits, runNext } from "../../src/jobs/apply";
import { DatabaseError, StorageUnavailable } from "../../src/store/errors";
import { embeddedMigrations } from "../../src/store/postgres/migrations";
import { PostgresStore } from "../../src/store/postgres/store";
import { createTestDatabase, postgresServer, requirePostgres, testPassword } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { testSql } from "../helpers/sql";
import { listenerCheck, WakeUps } from "../../src/store/postgres/wake-ups";
import { workChannel } from "../../src/store/postgres/jobs";
import { outboxRows } from "../../src/webhooks/outbox";

// What only a store shared by several processes must do: several PostgresStores on one database stand for
// several importd instances (each has its own pools, as each instance has).

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

if (requirePostgres("the PostgreSQL store's multi-instance tests")) {
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });
  async function instances(count: number, url?: string) {
    if (!url) {
      const database = await freshPostgresDatabase();
      cleanups.push(database.drop);
      url = database.url;
    }
    const stores = await Promise.all(Array.from({ length: count }, () => PostgresStore.open(url!, { outbox: outboxRows })));
    for (const store of stores) cleanups.push(() => store.close());
    return { url, stores };
  }
  const admin = (url: string) => {
    const sql = testSql(url);
    cleanups.push(() => sql.end());
    return sql;
  };

  test("three instances starting at once on an empty database all come up, migrated once", async () => {
    const database = await createTestDatabase();
    cleanups.push(database.drop);
    const { stores } = await instances(3, database.url);
    for (const store of stores) expect(await store.health()).toMatchObject({ reachable: true, migrated: true });
    const [row] = await admin(database.url)`SELECT count(*)::int AS count FROM drizzle.__drizzle_migrations`;
    expect(row!.count).toBe(embeddedMigrations().length);
  });

  test("a run holds its environment: another instance has nothing to claim; cut short (its connection ended), it is taken over with its attempt counted, and commits nothing", async () => {
    const { url, stores: [a, b] } = await instances(2);
    const environment = await new Access(a!.access).createEnvironment("one");
    const [queued] = await a!.queue.enqueue([{ environmentId: environment.id, type: "SubArea", recordCount: 1, body: encode([{ id: "x", name: "X" }]) }]);
    const jobId = queued!.conflict ? 0 : queued!.job.id;

    const cutShort = (await a!.queue.claimRun({ token: "a", environmentId: environment.id }, groupLimits))!;
    expect(cutShort.jobs.map((job) => [job.id, job.attempts])).toEqual([[jobId, 1]]);
    expect(await b!.queue.claimRun({ token: "b", environmentId: environment.id }, groupLimits)).toBeUndefined();
    expect((await b!.jobs.find(environment.id, jobId, ""))!.status).toBe("Processing");

    // What idle_in_transaction_session_timeout, a lost network or a killed instance does to the run's connection.
    await admin(url)`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'`;
    let takenOver;
    for (let tries = 0; !takenOver && tries < 100; tries++) {
      takenOver = await b!.queue.claimRun({ token: "b", environmentId: environment.id }, groupLimits);
      if (!takenOver) await Bun.sleep(20);
    }
    expect(takenOver!.jobs.map((job) => [job.id, job.status, job.attempts])).toEqual([[jobId, "Processing", 2]]);

    const outcome = (message: string) => [{ jobId, status: "Succeeded" as const, output: { message, total: 1, applied: 1, rejected: 0, errors: [] }, rejected: [] }];
    await expect(a!.queue.completeRun(cutShort, async () => outcome("from the run cut short"))).rejects.toBeInstanceOf(StorageUnavailable);
    expect((await b!.jobs.find(environment.id, jobId, ""))!.status).toBe("Processing");
    await b!.queue.completeRun(takenOver!, async () => outcome("from the run that took over"));
    expect((await a!.jobs.find(environment.id, jobId, ""))!).toMatchObject({ status: "Succeeded", attempts: 2, output: { message: "from the run that took over" } });
  });

  test("runs across instances apply an environment's jobs in the order they were accepted, each once", async () => {
    const { stores } = await instances(3);
    const environment = await new Access(stores[0]!.access).createEnvironment("one");
    // Each job rewrites the same record: the last accepted must win.
    const accepted: number[] = [];
    for (let n = 0; n < 30; n++) {
      const [answer] = await stores[n % 3]!.queue.enqueue([{ environmentId: environment.id, type: "SubArea", recordCount: 1, body: encode([{ id: "x", name: `v${n}` }]) }]);
      accepted.push(answer!.conflict ? 0 : answer!.job.id);
    }
    // The order: each run's record noted while the run holds its environment's lock (after its claim, before its
    // commit), so in the order the runs held it. (Noted after runNext returns, a run could be noted after the
    // next, which commits while the first still waits for its answers.)
    const held: string[] = [];
    const finished: number[] = [];
    await Promise.all(
      stores.map(async (store) => {
        for (let idle = 0; idle < 20; ) {
          const inspect = (records: Array<Record<string, unknown>>) => void held.push(String(records[0]!.name));
          const results = await runNext(store.queue, environment.id, { token: crypto.randomUUID(), singleJob: true, inspect });
          if (results) finished.push(...results.map((result) => result.id));
          else idle++, await Bun.sleep(5);
        }
      }),
    );
    expect(held).toEqual(accepted.map((_, n) => `v${n}`));
    expect(finished.sort((a, b) => a - b)).toEqual(accepted);
    const subareas = (await import("../../src/resources/registry")).resourceByPath("subareas")!;
    expect(await stores[1]!.records.get(subareas, environment.id, "x")).toMatchObject({ name: "v29", lastJobId: accepted[29] });
  });

  test("a payload is stored as importd compressed it: PostgreSQL does not compress it again", async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const [row] = await admin(database.url)`SELECT attstorage FROM pg_attribute WHERE attrelid = 'job_payloads'::regclass AND attname = 'body'`;
    expect(row!.attstorage).toBe("e");
  });

  test("an intake on one instance wakes the others within milliseconds; a lost listener listens again and wakes, and health says when it is down", async () => {
    const { url, stores: [a, b] } = await instances(2);
    const environment = await new Access(a!.access).createEnvironment("one");
    let wakes = 0;
    b!.watch({ work: () => wakes++, jobsFinished: () => {}, missed: () => {}, stalled: () => {}, problem: () => {} });
    for (let tries = 0; !(await b!.health()).wakeUps && tries < 100; tries++) await Bun.sleep(10);
    expect((await b!.health()).wakeUps).toBe(true);

    const before = wakes;
    const started = performance.now();
    await a!.queue.enqueue([{ environmentId: environment.id, type: "SubArea", recordCount: 1, body: encode([{ id: "x", name: "X" }]) }]);
    while (wakes === before && performance.now() - started < 1_000) await Bun.sleep(1);
    expect(wakes).toBeGreaterThan(before);
    // Well within the periodic scan's 2 s: the notification did it.
    expect(performance.now() - started).toBeLessThan(500);

    await admin(url)`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND (query ILIKE 'LISTEN%' OR query = ${listenerCheck})`;
    let sawDown = false;
    const deadline = Date.now() + 5_000;
    for (;;) {
      const { wakeUps } = await b!.health();
      if (wakeUps === false) sawDown = true;
      if (sawDown && wakeUps) break;
      if (Date.now() > deadline) throw new Error(`the listener did not come back (seen down: ${sawDown})`);
      await Bun.sleep(2);
    }
    const again = wakes;
    const restarted = performance.now();
    await a!.queue.enqueue([{ environmentId: environment.id, type: "SubArea", recordCount: 1, body: encode([{ id: "y", name: "Y" }]) }]);
    while (wakes === again && performance.now() - restarted < 1_000) await Bun.sleep(1);
    expect(performance.now() - restarted).toBeLessThan(500);
  });

  test("a listener is woken by other instances' intakes, a burst of them once, and not by its own instance's", async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    let wakes = 0;
    let listening!: () => void;
    const started = new Promise<void>((resolve) => (listening = resolve));
    const wakeUps = new WakeUps(database.url, { work: () => wakes++, jobsFinished: () => {}, missed: listening, stalled: () => {}, problem: () => {} }, "me");
    cleanups.push(async () => wakeUps.stop());
    await started;
    // Well before the periodic look (every 2 s): only notifications wake it meanwhile.
    const sql = admin(database.url);
    const before = wakes;
    await sql`SELECT pg_notify(${workChannel}, 'me')`;
    await Bun.sleep(100);
    expect(wakes).toBe(before);
    // One statement: the twenty arrive together, as a burst does, however slowly this process sends.
    await sql`SELECT pg_notify(${workChannel}, 'other-' || n) FROM generate_series(1, 20) AS n`;
    await Bun.sleep(100);
    expect(wakes).toBe(before + 1);
  });

  test("webhook claims made at once by three instances give each environment its share in flight, no more and no fewer", async () => {
    const { stores } = await instances(3);
    const [a] = stores;
    const access = new Access(a!.access);
    const busy = (await access.createEnvironment("busy")).id;
    const quiet = (await access.createEnvironment("quiet")).id;
    const all = ["job.succeeded", "job.partially_succeeded", "job.failed", "job.canceled"];
    for (let i = 0; i < 12; i++) await a!.webhooks.create(busy, { url: `https://hang.example/${i}`, events: all, secret: "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" });
    await a!.webhooks.create(quiet, { url: "https://quick.example/", events: all, secret: "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" });
    for (const environmentId of [busy, quiet]) {
      await a!.queue.enqueue([{ environmentId, type: "SubArea", recordCount: 1, body: encode([{ id: "x", name: "X" }]) }]);
      await runNext(a!.queue, environmentId, { token: crypto.randomUUID() });
    }
    // Connections open already, so that the looks below overlap.
    await Promise.all(stores.flatMap((store) => Array.from({ length: 3 }, () => store.webhooks.nextDueAt())));
    // Nine dispatchers' looks at once, one slot each: each must see the claims committed before it.
    const claims = await Promise.all(
      Array.from({ length: 9 }, (_, i) => stores[i % 3]!.webhooks.claimDue({ token: crypto.randomUUID(), limit: 1, perEnvironment: 3, leaseMs: 60_000, busy: [] })),
    );
    const claimed = claims.flat();
    expect(claimed.filter((delivery) => delivery.environmentId === busy)).toHaveLength(3);
    expect(claimed.filter((delivery) => delivery.environmentId === quiet)).toHaveLength(1);
    expect(new Set(claimed.map((delivery) => delivery.id)).size).toBe(4);
  });

  test("faults: an unreachable database is StorageUnavailable; a wrong password or a missing database is one line without the password", async () => {
    const server = await postgresServer();
    const nowhere = PostgresStore.openInThread({ backend: "postgres", url: "postgres://importd:pw@127.0.0.1:1/importd" }, { outbox: outboxRows });
    await expect(nowhere.queue.enqueue([{ environmentId: 1, type: "SubArea", recordCount: 0, body: encode([]) }])).rejects.toBeInstanceOf(StorageUnavailable);
    await nowhere.close();

    const wrongPassword = server.url("postgres").replace(encodeURIComponent(testPassword), "not-the-password");
    const refused = await PostgresStore.open(wrongPassword, { outbox: outboxRows }).catch((error) => error);
    expect(refused).toBeInstanceOf(DatabaseError);
    expect(refused.message).toContain("cannot log in to postgres://importd_test:***@127.0.0.1:");
    expect(refused.message).not.toContain("not-the-password");

    const missing = await PostgresStore.open(server.url("no_such_database"), { outbox: outboxRows }).catch((error) => error);
    expect(missing).toBeInstanceOf(DatabaseError);
    expect(missing.message).toContain("Create it first");
    expect(missing.message).not.toContain(testPassword);
  });
}
