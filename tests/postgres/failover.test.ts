import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import postgres from "postgres";
import { requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { spawnServer, type ServerProcess } from "../helpers/process";
import { tempDir } from "../helpers/server";

// PostgreSQL ends all of importd's connections (as a failover, a restart or an administrator's
// pg_terminate_backend would) while imports arrive: the server process lives on, every request is answered
// (202, or 503 with Retry-After that the client may send again, never 500) within seconds, and every job
// accepted is applied. (postgres.js's own reconnect backoff grows to 20 s and a connection attempt could hang for
// its whole connect timeout; see store/postgres/connection.ts for the bounds importd sets.)

if (requirePostgres("the lost-connection test")) {
  const cleanups: Array<() => Promise<void> | void> = [];
  let server: ServerProcess | undefined;
  afterAll(async () => {
    server?.proc.kill("SIGKILL");
    for (const cleanup of cleanups) await cleanup();
  });

  test("every connection terminated, five times in five seconds, under a stream of imports: the process lives on; every request is answered, 202 or 503 with Retry-After, never 500; every accepted job is applied", async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const dir = tempDir("importd-pg-lost-");
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    server = await spawnServer(dir, ["--database-url", database.url, "--workers", "2"]);
    const key = server.firstRunKey!;
    const base = `${server.url}/default`;
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
    cleanups.push(() => admin.end());

    // Every importd connection ended at once, five times, a second apart, while four clients send imports.
    let terminating = true;
    let terminated = 0;
    const terminator = (async () => {
      for (let round = 0; round < 5; round++) {
        await Bun.sleep(1_000);
        const rows = await admin`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name LIKE 'importd %' AND pid <> pg_backend_pid()`;
        terminated += rows.filter((row) => row.ok).length;
      }
      await Bun.sleep(1_000);
      terminating = false;
    })();

    const statuses = new Map<number | string, number>();
    const accepted: number[] = [];
    let slowest = 0;
    await Promise.all(
      Array.from({ length: 4 }, async (_, client) => {
        for (let n = 0; terminating; n++) {
          const sentAt = performance.now();
          const response = await fetch(`${base}/v2/subareas`, {
            signal: AbortSignal.timeout(15_000),
            method: "POST",
            headers: { "api-key": key, "content-type": "application/json" },
            body: JSON.stringify([{ id: `c${client}-${n}`, name: `n${n}` }]),
          }).catch(() => undefined);
          slowest = Math.max(slowest, performance.now() - sentAt);
          const answer = response?.status ?? "no answer";
          if (response?.status === 202) accepted.push(((await response.json()) as { id: number }).id);
          statuses.set(answer, (statuses.get(answer) ?? 0) + 1);
          if (response?.status === 503) expect(Number(response.headers.get("retry-after"))).toBeGreaterThan(0);
          else if (response && response.status !== 202) throw new Error(`${response.status}: ${await response.text()}`);
        }
      }),
    );
    await terminator;
    console.log(`lost connections: ${terminated} terminated; answers ${JSON.stringify(Object.fromEntries(statuses))}; slowest ${Math.round(slowest)} ms`);
    expect(terminated).toBeGreaterThan(8);
    expect(statuses.get(202)).toBeGreaterThan(0);
    expect(statuses.get("no answer")).toBeUndefined();

    // The runs go on: every accepted job is applied, without a restart (read in the database itself).
    const deadline = Date.now() + 30_000;
    for (;;) {
      const [{ left }] = (await admin`SELECT count(*)::int AS left FROM jobs WHERE id IN ${admin(accepted)} AND status <> 'Succeeded'`) as unknown as [{ left: number }];
      if (left === 0) break;
      if (Date.now() > deadline) throw new Error(`${left} of ${accepted.length} accepted jobs not Succeeded 30 s after the connections were lost`);
      await Bun.sleep(100);
    }
    // And the instance answers reads again (a 503 while it has no connection is asked again, as a client would).
    const readDeadline = Date.now() + 60_000;
    for (const answers: string[] = []; ; ) {
      const response = await fetch(`${base}/v2/status/${accepted[0]}`, { headers: { "api-key": key } });
      if (response.status === 200) break;
      answers.push(`${response.status} ${(await response.text()).slice(0, 200)}`);
      if (Date.now() > readDeadline) throw new Error(`the instance still does not answer reads 60 s after the connections were lost: ${answers.slice(-3).join(" | ")}`);
      await Bun.sleep(100);
    }
    expect(server.proc.exitCode).toBeNull();
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  }, 120_000);
}
