import { afterAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { testSql } from "../helpers/sql";
import { getJob, postJson, waitForJob } from "../helpers/api";
import { requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { spawnServer, type ServerProcess } from "../helpers/process";
import { tempDir } from "../helpers/server";
import { lostConnection, statementInProgress } from "../helpers/statement-in-progress";
import { until } from "../helpers/until";

// An instance paused (SIGSTOP) in the middle of a run, as a long GC pause, a frozen VM or a partition would:
// PostgreSQL ends its idle transaction (idle_in_transaction_session_timeout, lowered here), or, where it was paused
// in the middle of a statement, another instance finds its heartbeat silent and ends its connections
// (store/postgres/liveness.ts); another instance takes the job over and applies it; the paused one, resumed,
// cannot commit what it had started.

if (requirePostgres("the fencing test")) {
  const servers: ServerProcess[] = [];
  const cleanups: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    for (const server of servers) {
      server.proc.kill("SIGCONT");
      server.proc.kill("SIGKILL");
    }
    for (const cleanup of cleanups) await cleanup();
  });
  const start = async (url: string) => {
    const dir = tempDir("importd-pg-fence-");
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const server = await spawnServer(dir, ["--database-url", url, "--workers", "2"]);
    servers.push(server);
    return server;
  };

  test("a paused instance's run is taken over by another; resumed, it commits nothing, and the job is applied once", async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const admin = testSql(database.url);
    cleanups.push(() => admin.end());
    const name = new URL(database.url).pathname.slice(1);
    await admin.unsafe(`ALTER DATABASE "${name}" SET idle_in_transaction_session_timeout = '1500ms'`);

    const paused = await start(database.url);
    const key = paused.firstRunKey!;
    const base = (server: ServerProcess) => `${server.url}/default`;
    // Big enough that its run lasts a while: parsed, then upserted, in one transaction.
    const records = Array.from({ length: 150_000 }, (_, i) => ({ id: `sa-${i}`, name: `Sub area ${i}`, description: "x".repeat(40) }));
    const response = await postJson(base(paused), "subareas", key, records);
    expect(response.status).toBe(202);
    const jobId = ((await response.json()) as { id: number }).id;
    for (let tries = 0; (await getJob(base(paused), key, jobId)).importJobStatus !== "Processing"; tries++) {
      if (tries > 1_000) throw new Error("the job never started");
      await Bun.sleep(5);
    }
    paused.proc.kill("SIGSTOP");

    const other = await start(database.url);
    // Taken over once the paused one's heartbeat is silent, then parsed and applied again: seconds alone on the machine,
    // over a minute with npm test's passes side by side on 2 cores.
    const done = await waitForJob(base(other), key, jobId, 150_000);
    expect(done).toMatchObject({ importJobStatus: "Succeeded", output: { applied: records.length } });
    const [attempts] = await admin`SELECT attempts FROM jobs WHERE id = ${jobId}`;
    expect(attempts!.attempts).toBe(2);

    // Resumed: its connection is gone, so its run fails and commits nothing; it goes on serving.
    const completedAt = done.completedAt;
    paused.proc.kill("SIGCONT");
    await until(() => paused.stderrLines.some((line) => line.includes('"job attempt failed; will retry"') && line.includes(`"jobId":${jobId}`)), {
      what: "the resumed instance's run to fail on its lost connection",
      deadlineMs: 30_000,
    });
    await until(async () => (await fetch(`${paused.url}/healthz`).catch(() => undefined))?.status === 200, { what: "the resumed instance to serve again" });
    const after = await getJob(base(paused), key, jobId);
    expect(after).toMatchObject({ importJobStatus: "Succeeded", completedAt });
    const [rows] = await admin`SELECT count(*)::int AS count FROM sub_areas`;
    expect(rows!.count).toBe(records.length);
    // Its log: the run it had started failed on its lost connection, and it never finished the job.
    paused.proc.kill("SIGTERM");
    await paused.proc.exited;
    const log = (await paused.stderr).split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(log.some((entry) => entry.msg === "job attempt failed; will retry" && entry.jobId === jobId)).toBe(true);
    expect(log.some((entry) => entry.msg === "job finished" && entry.jobId === jobId)).toBe(false);
  }, 240_000);

  // The case no timeout of PostgreSQL's ends: a backend waiting for the rest of a statement is `active`, not idle.
  // Stood in for by a connection named as a stalled instance's, silent for an hour, holding the environment's lock
  // in pg_sleep, with idle_in_transaction_session_timeout not set. The server judges others once it has beaten
  // for 10 s.
  test("an environment held mid-statement by a stalled instance is freed by the others, and its job applied", async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const admin = testSql(database.url);
    cleanups.push(() => admin.end());
    const server = await start(database.url);
    const key = server.firstRunKey!;
    const base = `${server.url}/default`;

    const stalledId = randomUUID();
    await admin`INSERT INTO instances (id, heartbeat_at) VALUES (${stalledId}, now() - interval '1 hour')`;
    const [environment] = await admin`SELECT id FROM environments WHERE slug = 'default'`;
    const held = await statementInProgress(database.url, admin, `importd ${stalledId}`, environment!.id as number);
    cleanups.push(held.end);

    const response = await postJson(base, "subareas", key, [{ id: "sa-1", name: "Sub area 1" }]);
    expect(response.status).toBe(202);
    const jobId = ((await response.json()) as { id: number }).id;
    const done = await waitForJob(base, key, jobId, 30_000);
    expect(done).toMatchObject({ importJobStatus: "Succeeded", output: { applied: 1 } });
    expect(await held.ended).toBe(lostConnection);

    server.proc.kill("SIGTERM");
    await server.proc.exited;
    const log = (await server.stderr).split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(log.find((entry) => entry.msg === "ended the connections of a stalled instance; its runs will be taken over")).toMatchObject({
      level: "warn",
      instance: stalledId,
      connections: 1,
    });
  }, 60_000);
}
