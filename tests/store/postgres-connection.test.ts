import { afterAll, expect, test } from "bun:test";
import { Access } from "../../src/access/access";
import { groupLimits } from "../../src/jobs/apply";
import { resourceByPath } from "../../src/resources/registry";
import { onPool, openPool, Transaction } from "../../src/store/postgres/connection";
import { PostgresJobReads } from "../../src/store/postgres/jobs";
import { PostgresStore } from "../../src/store/postgres/store";
import { outboxRows } from "../../src/webhooks/outbox";
import { requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { testSql } from "../helpers/sql";

// The PostgreSQL connections as importd keeps them (store/postgres/connection.ts): deadlines, which connections go
// back to the pool, named statements, and settings a database URL cannot change. A pool here has a short statement
// deadline, so that a deadline is seen to pass in half a second.

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

if (requirePostgres("the PostgreSQL store's connections")) {
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });
  async function database() {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    return database.url;
  }
  function pool(url: string, statementMs = 500) {
    const { pool } = openPool(url, { max: 1, instance: "tests", statementMs });
    cleanups.push(() => pool.end());
    return pool;
  }
  const pidOf = async (transaction: Transaction) => (await transaction.query<{ pid: number }>("SELECT pg_backend_pid() AS pid"))[0]!.pid;

  test("a statement past its deadline fails at once, and its connection is closed, never pooled again; one the server refused is pooled again", async () => {
    const url = await database();
    const admin = testSql(url);
    cleanups.push(() => admin.end());
    const connections = pool(url);

    const slow = await Transaction.begin(connections);
    const slowPid = await pidOf(slow);
    const startedAt = performance.now();
    await expect(slow.query("SELECT pg_sleep(5)")).rejects.toThrow("Query read timeout");
    expect(performance.now() - startedAt).toBeLessThan(1_500);
    await slow.rollback();
    const next = await Transaction.begin(connections);
    expect(await pidOf(next)).not.toBe(slowPid);
    // The server ends the statement whose client went away (client_connection_check_interval): no lock stays held.
    for (let tries = 0; (await admin`SELECT 1 FROM pg_stat_activity WHERE pid = ${slowPid}`).length > 0; tries++) {
      if (tries > 100) throw new Error("the backend of the closed connection is still there after 5 s");
      await Bun.sleep(50);
    }

    const refusedPid = await pidOf(next);
    await expect(next.query("SELECT 1/0")).rejects.toThrow("division by zero");
    await next.rollback();
    const again = await Transaction.begin(connections);
    expect(await pidOf(again)).toBe(refusedPid);
    await again.rollback();
  });

  test("a COPY may take longer than the statement deadline: it has the bulk one", async () => {
    const url = await database();
    const connections = pool(url);
    const transaction = await Transaction.begin(connections);
    await transaction.query("CREATE TEMP TABLE slow_copy (n int)");
    async function* slowly() {
      for (let n = 0; n < 3; n++) {
        await Bun.sleep(400);
        yield `${n}\n`;
      }
    }
    await transaction.copyIn("COPY slow_copy (n) FROM STDIN", slowly());
    expect(await transaction.query("SELECT count(*)::int AS n FROM slow_copy")).toEqual([{ n: 3 }]);
    await transaction.rollback();
  });

  test("a status poll's statement is prepared once per connection (named), then run from its plan", async () => {
    const url = await database();
    const connections = pool(url, 10_000);
    const reads = new PostgresJobReads(onPool(connections));
    await reads.find(1, 1, "");
    await reads.find(1, 2, "");
    const prepared = (await connections.query<{ statement: string }>("SELECT statement FROM pg_prepared_statements")).rows.map((row) => row.statement);
    expect(prepared.filter((text) => text.includes("FROM jobs WHERE id = $1 AND environment_id = $2"))).toHaveLength(1);
  });

  test("job ids past 2^31, and past 2^32, are numbers everywhere: intake, reads, claims, completion, records' lastJobId", async () => {
    const url = await database();
    const admin = testSql(url);
    cleanups.push(() => admin.end());
    const big = 2 ** 33 + 5;
    await admin.unsafe(`ALTER TABLE jobs ALTER COLUMN id RESTART WITH ${big}`);
    const store = await PostgresStore.open(url, { outbox: outboxRows });
    cleanups.push(() => store.close());
    const environmentId = (await new Access(store.access).createEnvironment("one")).id;
    const [enqueued] = await store.queue.enqueue([{ environmentId, type: "SubArea", recordCount: 1, body: encode([{ id: "a", name: "A" }]) }]);
    const job = enqueued!.conflict ? undefined : enqueued!.job;
    expect(job!.id).toBe(big);
    expect((await store.jobs.find(environmentId, big, ""))!.id).toBe(big);
    expect((await store.jobs.list(environmentId, { limit: 10, after: big + 1, retainedSince: "" })).map((listed) => listed.id)).toEqual([big]);
    expect((await store.queue.heads()).map((head) => head.jobId)).toEqual([big]);
    const run = (await store.queue.claimRun({ token: "t", environmentId }, groupLimits))!;
    expect(run.jobs.map((claimed) => claimed.id)).toEqual([big]);
    const subareas = resourceByPath("subareas")!;
    await store.queue.completeRun(run, async (records) => {
      await records.upsert(subareas, big, [{ id: "a", name: "A" }]);
      return [{ jobId: big, status: "Succeeded", output: { message: "ok", total: 1, applied: 1, rejected: 0, errors: [] }, rejected: [] }];
    });
    expect(await store.records.get(subareas, environmentId, "a")).toMatchObject({ lastJobId: big });
    expect((await store.jobs.find(environmentId, big, ""))!.status).toBe("Succeeded");
  });

  test("a database URL's own application_name and options do not replace importd's: its connections stay named and checked", async () => {
    const url = new URL(await database());
    url.searchParams.set("application_name", "someone-else");
    url.searchParams.set("options", "-c statement_timeout=123456");
    const { pool: connections } = openPool(url.toString(), { max: 1, instance: "named" });
    cleanups.push(() => connections.end());
    const [settings] = (await connections.query("SELECT current_setting('application_name') AS name, current_setting('statement_timeout') AS timeout, current_setting('client_connection_check_interval') AS checked")).rows;
    expect(settings).toEqual({ name: "importd named", timeout: "123456ms", checked: "2s" });
  });
}
