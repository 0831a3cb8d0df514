import { afterAll, beforeAll, expect, test } from "bun:test";
import postgres from "postgres";
import { requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { startTestServer, type TestServer } from "../helpers/server";

// PostgreSQL refuses importd's connections for a while (closed to connections, as an administrator does before
// maintenance): every operation of the API answers 503 with Retry-After, as its OpenAPI document says (each answer
// is checked against it, tests/helpers/contract.ts), never 500; once connections are allowed again, all works.

if (requirePostgres("the storage-unavailable test")) {
  let server: TestServer;
  let admin: postgres.Sql;
  let database: Awaited<ReturnType<typeof freshPostgresDatabase>>;
  let name: string;
  beforeAll(async () => {
    database = await freshPostgresDatabase();
    // A short shutdown deadline: once in about ten runs a run was still waiting on a connection attempt at the
    // stop (noted for planners), and the stop waits for it up to the deadline.
    server = await startTestServer({ databaseUrl: database.url, shutdownTimeout: 5 });
    const url = new URL(database.url);
    name = url.pathname.slice(1);
    url.pathname = "/postgres";
    admin = postgres(url.toString(), { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await admin.unsafe(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`);
    await admin.end();
    await server.close();
    await database.drop();
  }, 30_000);

  test("every operation answers 503 with Retry-After while the database refuses connections, and works again after", async () => {
    const headers = { "api-key": server.key, "content-type": "application/json" };
    const job = (await (await fetch(`${server.base}/v2/subareas`, { method: "POST", headers, body: JSON.stringify([{ id: "north", name: "North" }]) })).json()) as { id: number };
    const requests: Array<[string, string, string?]> = [
      ["POST", "/v2/subareas", JSON.stringify([{ id: "south", name: "South" }])],
      ["GET", "/v2/subareas"],
      ["GET", "/v2/subareas/north"],
      ["GET", `/v2/status/${job.id}`],
      ["GET", `/v2/status/${job.id}/rejected`],
      ["POST", `/v2/status/${job.id}/cancel`],
      ["GET", "/v2/jobs"],
    ];

    await admin.unsafe(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS false`);
    await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${name} AND pid <> pg_backend_pid()`;
    for (const [method, path, body] of requests) {
      const response = await fetch(`${server.base}${path}`, { method, headers, body, signal: AbortSignal.timeout(20_000) });
      expect({ method, path, status: response.status }).toEqual({ method, path, status: 503 });
      expect(Number(response.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(((await response.json()) as { detail: string }).detail).toContain("could not use its storage just now");
    }
    expect(server.logs.filter((entry) => entry.msg === "request" && Number(entry.status) >= 500 && entry.status !== 503)).toEqual([]);

    await admin.unsafe(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`);
    const deadline = Date.now() + 20_000;
    for (;;) {
      const response = await fetch(`${server.base}/v2/status/${job.id}`, { headers, signal: AbortSignal.timeout(20_000) });
      if (response.status === 200) break;
      expect(response.status).toBe(503);
      if (Date.now() > deadline) {
        const lastLogs = server.logs.slice(-12).map((entry) => JSON.stringify({ ...entry, error: String(entry.error ?? "").slice(0, 400) }));
        throw new Error(`still 503 20 s after the database accepted connections again; the server's last log lines:\n${lastLogs.join("\n")}`);
      }
      await Bun.sleep(250);
    }
    const after = await fetch(`${server.base}/v2/subareas`, { method: "POST", headers, body: JSON.stringify([{ id: "south", name: "South" }]) });
    expect(after.status).toBe(202);
  }, 60_000);
}
