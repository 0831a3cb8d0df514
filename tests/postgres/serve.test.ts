import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { importAndWait, importBatch, waitForJob } from "../helpers/api";
import { testPassword, requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { asset, seedReferenceData } from "../helpers/records";
import { importd, spawnServer, type ServerProcess } from "../helpers/process";
import { tempDir } from "../helpers/server";

// importd serve, env and key on PostgreSQL (--database-url), as separate processes: two instances on one database.

if (requirePostgres("importd serve on PostgreSQL")) {
  const servers: ServerProcess[] = [];
  const cleanups: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    for (const server of servers) server.proc.kill("SIGKILL");
    for (const cleanup of cleanups) await cleanup();
  });
  const dataDir = () => {
    const dir = tempDir("importd-pg-serve-");
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    return dir;
  };

  test("two instances on one database: the first creates default and prints its key once; a job sent to one is followed on the other; keys made or revoked with the CLI count on the next request; the password is never shown", async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const start = async () => {
      const server = await spawnServer(dataDir(), ["--database-url", database.url, "--workers", "2"]);
      servers.push(server);
      return server;
    };
    const a = await start();
    const b = await start();
    const key = a.firstRunKey!;
    expect(key).toBeDefined();
    expect(b.firstRunKey).toBeUndefined();
    expect(a.stdout.join("\n")).toContain("; database: postgres://importd_test:***@127.0.0.1:");

    const job = await importBatch(`${a.url}/default`, "subareas", key, [{ id: "north", name: "North" }]);
    const done = await waitForJob(`${b.url}/default`, key, job.id);
    expect(done).toMatchObject({ importJobStatus: "Succeeded", output: { applied: 1 } });
    const record = await fetch(`${b.url}/default/v2/subareas/north`, { headers: { "api-key": key } });
    expect(await record.json()).toMatchObject({ id: "north", name: "North", lastJobId: job.id });

    const created = await importd(["key", "create", "default", "--database-url", database.url]);
    expect(created.code).toBe(0);
    const second = created.stdout.trim();
    const jobsWith = (server: ServerProcess, apiKey: string) => fetch(`${server.url}/default/v2/jobs`, { headers: { "api-key": apiKey } }).then((response) => response.status);
    expect([await jobsWith(a, second), await jobsWith(b, second)]).toEqual([200, 200]);
    const revoked = await importd(["key", "revoke", second.split("_")[1]!], { IMPORTD_DATABASE_URL: database.url });
    expect(revoked.code).toBe(0);
    expect([await jobsWith(a, second), await jobsWith(b, second)]).toEqual([401, 401]);

    const listed = await importd(["env", "list", "--database-url", database.url]);
    expect(listed.stdout).toStartWith("default\t");
    for (const server of [a, b]) {
      const ready = await fetch(`${server.url}/readyz`);
      expect(ready.status).toBe(200);
      server.proc.kill("SIGTERM");
      expect(await server.proc.exited).toBe(0);
      const output = `${server.stdout.join("\n")}\n${await server.stderr}`;
      expect(output).not.toContain(testPassword);
    }
  }, 60_000);

  test("the failed-key limit holds across instances: wrong keys sent to one count on the other, per address or per IPv6 /64", async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const start = async () => {
      // --trusted-proxies as by default (loopback): the test is a proxy on this machine when it sends X-Forwarded-For.
      const server = await spawnServer(dataDir(), ["--database-url", database.url, "--auth-failures-per-minute", "3"]);
      servers.push(server);
      return server;
    };
    const a = await start();
    const b = await start();
    const key = a.firstRunKey!;
    const jobs = (server: ServerProcess, apiKey: string, forwardedFor?: string) =>
      fetch(`${server.url}/default/v2/jobs`, { headers: { "api-key": apiKey, ...(forwardedFor ? { "x-forwarded-for": forwardedFor } : {}) } });
    const wrong = `${"0".repeat(64)}_1`;
    // This machine's own requests (127.0.0.1, nothing forwarded).
    expect((await jobs(a, wrong)).status).toBe(401);
    expect((await jobs(b, wrong)).status).toBe(401);
    expect((await jobs(a, key)).status).toBe(200);
    expect((await jobs(a, wrong)).status).toBe(401);
    // Three wrong keys from one client, on two instances: the next request is refused on either, right key or not.
    for (const server of [b, a]) {
      const refused = await jobs(server, key);
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    }
    // A forwarded IPv6 client, from three addresses of one /64 over both instances: the /64 is refused on either.
    expect((await jobs(a, wrong, "2001:db8:7:7::1")).status).toBe(401);
    expect((await jobs(b, wrong, "2001:db8:7:7::2")).status).toBe(401);
    expect((await jobs(a, wrong, "[2001:db8:7:7::3]:443")).status).toBe(401);
    for (const server of [b, a]) expect((await jobs(server, key, "2001:db8:7:7:ffff::1")).status).toBe(429);
    expect((await jobs(b, key, "2001:db8:7:8::1")).status).toBe(200);
  }, 60_000);

  test("a database that cannot be reached, or refuses the password, is one line without the password, exit 1", async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const wrong = database.url.replace(encodeURIComponent(testPassword), "wrong-pw");
    const refused = await importd(["serve", "--port", "0", "--database-url", wrong]);
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim().split("\n")).toHaveLength(1);
    expect(refused.stderr).toContain("cannot log in to postgres://importd_test:***@");
    expect(refused.stderr).not.toContain("wrong-pw");
    const nowhere = await importd(["env", "list"], { IMPORTD_DATABASE_URL: "postgres://importd:secret-pw@127.0.0.1:1/importd" });
    expect(nowhere.code).toBe(1);
    expect(nowhere.stderr).toContain("cannot reach the database postgres://importd:***@127.0.0.1:1/importd");
    expect(nowhere.stderr).not.toContain("secret-pw");
  }, 60_000);

  test("a batch of assets with references is applied on PostgreSQL as on SQLite", async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const server = await spawnServer(dataDir(), ["--database-url", database.url]);
    servers.push(server);
    const base = `${server.url}/default`;
    const key = server.firstRunKey!;
    await seedReferenceData(base, key);
    const job = await importAndWait(base, "assets", key, [asset(1), asset(2, { subAreaId: "west" })]);
    expect(job).toMatchObject({ importJobStatus: "PartiallySucceeded", output: { applied: 1, rejected: 1 } });
    expect(job.output!.errors[0]).toMatchObject({ index: 1 });
    const stored = await (await fetch(`${base}/v2/assets/${asset(1).id}`, { headers: { "api-key": key } })).json();
    expect(stored).toMatchObject({ ...asset(1), lastJobId: job.id });
    const rejected = await (await fetch(`${base}/v2/status/${job.id}/rejected`, { headers: { "api-key": key } })).json();
    expect(JSON.stringify(rejected)).toContain(asset(2).id);
  }, 60_000);
}
