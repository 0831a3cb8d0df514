import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { deadlines } from "../../src/store/postgres/connection";
import { allSucceeded, answeredAgain, answersAgain, instanceBackends, underLoad, type Answers } from "../helpers/database-faults";
import { postgresServer, requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { spawnServer, type ServerProcess } from "../helpers/process";
import { tempDir } from "../helpers/server";
import { testSql } from "../helpers/sql";
import { until } from "../helpers/until";

// What PostgreSQL can do to a running importd, while four clients send imports and read their jobs: end every
// connection (a failover, a restart, an administrator), refuse connections for a while (the database closed), or
// stop answering on connections that stay open (a frozen backend, a network that drops packets). Every request is
// answered (202 or 200, or 503 with Retry-After that the client sends again, never 500) within a bound; the process
// lives on; every job accepted is applied once the database is back, without a restart.

// Rounds of the failover test in a row, on one server (`npm run pg:failover` runs 20).
const failoverRounds = Number(process.env.PG_FAILOVER_ROUNDS ?? 2);

if (requirePostgres("the database fault tests")) {
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  async function instance() {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const dir = tempDir("importd-pg-faults-");
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const server = await spawnServer(dir, ["--database-url", database.url, "--workers", "2"]);
    cleanups.push(() => server.proc.kill("SIGKILL"));
    const admin = testSql(database.url);
    cleanups.push(() => admin.end());
    return { server, key: server.firstRunKey!, base: `${server.url}/default`, name: new URL(database.url).pathname.slice(1), admin };
  }

  const summary = (answers: Answers) => `answers ${JSON.stringify(Object.fromEntries(answers.statuses))}, slowest ${Math.round(answers.slowestMs)} ms`;

  /** Stops the server: a clean exit, no worker thread lost on the way (each would have been replaced silently), no error unhandled. */
  async function stoppedCleanly(server: ServerProcess) {
    server.proc.kill("SIGTERM");
    expect(await server.proc.exited).toBe(0);
    const problems = (await server.stderr).split("\n").filter((line) => line.includes("worker thread crashed") || line.includes("unhandled error"));
    expect(problems).toEqual([]);
  }

  async function recovered(server: ServerProcess, key: string, base: string, admin: ReturnType<typeof testSql>, answers: Answers) {
    expect(answers.statuses.get("no answer")).toBeUndefined();
    expect(answers.statuses.get(202)).toBeGreaterThan(0);
    await allSucceeded(admin, answers.accepted, 30_000);
    await answersAgain(`${base}/v2/status/${answers.accepted[0]}`, key, 30_000);
    expect(server.proc.exitCode).toBeNull();
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  }

  test(`every connection terminated, five times in a row, each as soon as it serves again, ${failoverRounds} rounds in a row: every request answered within seconds, every accepted job applied`, async () => {
    const { server, key, base, name, admin } = await instance();
    for (let round = 1; round <= failoverRounds; round++) {
      let terminated = 0;
      const answers = await underLoad(
        base,
        key,
        async (answers) => {
          // Each time, once the instance is seen to accept imports again (on new connections): not a fixed second.
          for (let n = 0; n < 5; n++) {
            await answeredAgain(answers, 202, { count: 4, what: n === 0 ? "under load" : `after termination ${n}` });
            terminated += (await admin`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE datname = ${name} AND application_name LIKE 'importd %'`).filter((row) => row.ok).length;
          }
          await answeredAgain(answers, 202, { count: 4, what: "after the last termination" });
        },
        { answerWithinMs: 15_000, round },
      );
      console.log(`failover round ${round}: ${terminated} connections terminated; ${summary(answers)}`);
      expect(terminated).toBeGreaterThan(8);
      await recovered(server, key, base, admin, answers);
      // A connection is made again within a second or so: no request waited for a statement's deadline.
      expect(answers.slowestMs).toBeLessThan(deadlines.statementMs);
    }
    await stoppedCleanly(server);
  }, 60_000 + failoverRounds * 45_000);

  test("the database closed to connections, its connections ended: every request is answered 503 at once meanwhile, and all of it goes on after", async () => {
    const { server, key, base, name, admin } = await instance();
    // From the server's own database: the closed one takes no connection, not even a superuser's.
    const postgres = await postgresServer();
    const answers = await underLoad(
      base,
      key,
      async (answers) => {
        await answeredAgain(answers, 202, { count: 4, what: "under load" });
        await postgres.admin(async (sql) => {
          await sql.unsafe(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS false`);
          await sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${name} AND application_name LIKE 'importd %'`;
        });
        // Closed until every client has been told 503 a few times and the instance says it is not ready.
        await answeredAgain(answers, 503, { count: 12, what: "while the database is closed" });
        await until(async () => (await fetch(`${server.url}/readyz`)).status, { holds: (status) => status === 503, what: "/readyz to say 503 while the database is closed" });
        await postgres.admin((sql) => sql.unsafe(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`));
        await answeredAgain(answers, 202, { count: 4, what: "once the database is open again" });
      },
      { answerWithinMs: 15_000 },
    );
    console.log(`database closed: ${summary(answers)}`);
    expect(answers.statuses.get(503)).toBeGreaterThan(0);
    // Refused connections are told at once: nothing waits for a deadline.
    expect(answers.slowestMs).toBeLessThan(deadlines.connectMs);
    await recovered(server, key, base, admin, answers);
    await stoppedCleanly(server);
  }, 90_000);

  test("the instance's backends frozen (SIGSTOP) past the statement deadline: a request whose statement gets no answer is answered 503 after the statement deadline, its connection replaced; all of it goes on after", async () => {
    const { server, key, base, name, admin } = await instance();
    let stopped: number[] = [];
    const resume = () => {
      for (const pid of stopped) process.kill(pid, "SIGCONT");
      stopped = [];
    };
    cleanups.push(resume);
    const answers = await underLoad(
      base,
      key,
      async (answers) => {
        await answeredAgain(answers, 202, { count: 4, what: "under load" });
        stopped = await instanceBackends(admin, name);
        for (const pid of stopped) process.kill(pid, "SIGSTOP");
        // Frozen until a statement sent to them has met its deadline and its request was told 503. Requests queued
        // for a connection meanwhile are told 503 sooner, when the pool's wait (the connect deadline) ends: those do
        // not count.
        await until(() => (answers.slowestBy.get(503) ?? 0) > deadlines.statementMs, { what: "a 503 after a statement's deadline met on a frozen backend", deadlineMs: 3 * deadlines.statementMs });
        resume();
        await answeredAgain(answers, 202, { count: 4, what: "once the backends run again" });
      },
      { answerWithinMs: 3 * deadlines.statementMs },
    );
    console.log(`backends frozen: ${summary(answers)}`);
    // The statements sent to the frozen backends found their deadline, and their requests a 503.
    expect(answers.slowestBy.get(503)).toBeGreaterThan(deadlines.statementMs);
    // A request waits for one deadline, two when its intake queued behind one that was waiting: never longer.
    expect(answers.slowestMs).toBeLessThan(2 * deadlines.statementMs + deadlines.connectMs);
    await recovered(server, key, base, admin, answers);
    await stoppedCleanly(server);
  }, 120_000);
}
