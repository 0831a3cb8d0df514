import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import postgres from "postgres";
import { getJob, postJson, waitForJob } from "../helpers/api";
import { requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { spawnServer, type ServerProcess } from "../helpers/process";
import { tempDir } from "../helpers/server";

// An instance paused (SIGSTOP) in the middle of a run, as a long GC pause, a frozen VM or a partition would:
// PostgreSQL ends its idle transaction (idle_in_transaction_session_timeout, lowered here), another instance
// takes the job over and applies it; the paused one, resumed, cannot commit what it had started.

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
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
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
    const done = await waitForJob(base(other), key, jobId, 60_000);
    expect(done).toMatchObject({ importJobStatus: "Succeeded", output: { applied: records.length } });
    const [attempts] = await admin`SELECT attempts FROM jobs WHERE id = ${jobId}`;
    expect(attempts!.attempts).toBe(2);

    // Resumed: its connection is gone, so its run fails and commits nothing; it goes on serving.
    const completedAt = done.completedAt;
    paused.proc.kill("SIGCONT");
    for (let tries = 0; tries < 100 && (await fetch(`${paused.url}/healthz`).catch(() => undefined))?.status !== 200; tries++) await Bun.sleep(50);
    await Bun.sleep(1_500);
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
  }, 120_000);
}
