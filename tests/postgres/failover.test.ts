import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import postgres from "postgres";
import { requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { spawnServer, type ServerProcess } from "../helpers/process";
import { tempDir } from "../helpers/server";

// PostgreSQL ends all of importd's connections (as a failover, a restart or an administrator's
// pg_terminate_backend would) while imports arrive: the server process lives on, and a request is answered 202,
// or 503 with Retry-After that the client may send again, never 500.
//
// Not asserted yet, and known (see docs/reliability.md): after such losses postgres.js can leave a query
// unanswered for good, so some requests get no answer and the instance's runs can stall until it restarts.

if (requirePostgres("the lost-connection test")) {
  const cleanups: Array<() => Promise<void> | void> = [];
  let server: ServerProcess | undefined;
  afterAll(async () => {
    server?.proc.kill("SIGKILL");
    for (const cleanup of cleanups) await cleanup();
  });

  test("every connection terminated, twice, under a stream of imports: the process lives on; answers are 202 or 503 with Retry-After, never 500", async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const dir = tempDir("importd-pg-lost-");
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    server = await spawnServer(dir, ["--database-url", database.url, "--workers", "2"]);
    const key = server.firstRunKey!;
    const base = `${server.url}/default`;
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
    cleanups.push(() => admin.end());

    // Every importd connection ended at once, twice, two seconds apart, while four clients send imports.
    let terminating = true;
    let terminated = 0;
    const terminator = (async () => {
      for (let round = 0; round < 2; round++) {
        await Bun.sleep(2_000);
        const rows = await admin`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = 'importd' AND pid <> pg_backend_pid()`;
        terminated += rows.filter((row) => row.ok).length;
      }
      await Bun.sleep(1_000);
      terminating = false;
    })();

    const statuses = new Map<number | string, number>();
    await Promise.all(
      Array.from({ length: 4 }, async (_, client) => {
        for (let n = 0; terminating; n++) {
          const response = await fetch(`${base}/v2/subareas`, {
            signal: AbortSignal.timeout(15_000),
            method: "POST",
            headers: { "api-key": key, "content-type": "application/json" },
            body: JSON.stringify([{ id: `c${client}-${n}`, name: `n${n}` }]),
          }).catch(() => undefined);
          const answer = response?.status ?? "no answer";
          statuses.set(answer, (statuses.get(answer) ?? 0) + 1);
          if (response?.status === 503) expect(Number(response.headers.get("retry-after"))).toBeGreaterThan(0);
          else if (response && response.status !== 202) throw new Error(`${response.status}: ${await response.text()}`);
        }
      }),
    );
    await terminator;
    console.log(`lost connections: ${terminated} terminated; answers ${JSON.stringify(Object.fromEntries(statuses))}`);
    expect(terminated).toBeGreaterThan(2);
    expect(statuses.get(202)).toBeGreaterThan(0);
    expect(server.proc.exitCode).toBeNull();
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  }, 120_000);
}
