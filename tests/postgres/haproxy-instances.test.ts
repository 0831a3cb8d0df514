import { afterAll, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { postJson, waitForJob } from "../helpers/api";
import { adminCommand, haproxyBinary, serverStates } from "../helpers/haproxy";
import { freePort } from "../helpers/net";
import { requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { projectRoot, spawnServer, type ServerProcess } from "../helpers/process";
import { tempDir } from "../helpers/server";
import { testAuthority, writeIdentity } from "../helpers/tls";

// deploy/haproxy.cfg, as shipped, in front of three importd instances on one PostgreSQL database (README:
// "Several instances on PostgreSQL"): HAProxy checks each on /readyz and sends requests round-robin; an
// instance that is stopped is taken out, and the imports go on through the others. HTTPS all the way, as on
// separate hosts: clients to HAProxy, and HAProxy to the instances, whose certificate it checks
// (PROXY_UPSTREAM_CA); here all of them signed by an authority of the test's own.

const haproxy = haproxyBinary;
if (!haproxy && process.env.CI) throw new Error("haproxy is not installed (looked on PATH and in /usr/sbin): apt-get install haproxy");

if (haproxy && requirePostgres("three instances behind HAProxy")) {
  const cleanups: Array<() => Promise<void> | void> = [];
  const instances: ServerProcess[] = [];
  let proxy: Subprocess<"ignore", "pipe", "pipe"> | undefined;
  afterAll(async () => {
    proxy?.kill("SIGKILL");
    for (const instance of instances) instance.proc.kill("SIGKILL");
    for (const cleanup of cleanups) await cleanup();
  });

  test("three instances behind deploy/haproxy.cfg: all checked UP on /readyz, requests spread over them; one drained and stopped, imports go on through the others and it is seen DOWN", async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const dir = tempDir("importd-pg-haproxy-");
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const authority = await testAuthority("HAProxy and instances");
    const caFile = join(dir, "ca.crt");
    writeFileSync(caFile, authority.cert);
    const served = await authority.issue(["127.0.0.1", "localhost"]);
    const instanceFiles = writeIdentity(dir, served);
    const proxyCertificate = join(dir, "haproxy.pem");
    writeFileSync(proxyCertificate, served.cert + served.key);
    for (let n = 1; n <= 3; n++) {
      instances.push(
        await spawnServer(join(dir, `data${n}`), ["--database-url", database.url, "--workers", "2", "--trusted-proxies", "127.0.0.1/32", "--tls-cert", instanceFiles.cert, "--tls-key", instanceFiles.key]),
      );
    }
    const key = instances[0]!.firstRunKey!;
    const port = await freePort();
    const socket = join(dir, "haproxy.sock");
    proxy = Bun.spawn([haproxy, "-db", "-f", "deploy/haproxy.cfg"], {
      cwd: projectRoot,
      env: {
        ...process.env,
        PROXY_LISTEN: `127.0.0.1:${port}`,
        PROXY_CERTIFICATE: proxyCertificate,
        PROXY_UPSTREAM_CA: caFile,
        PROXY_UPSTREAM: new URL(instances[0]!.url).host,
        PROXY_UPSTREAM2: new URL(instances[1]!.url).host,
        PROXY_UPSTREAM3: new URL(instances[2]!.url).host,
        PROXY_STATS_SOCKET: socket,
        PROXY_LOG: "stdout",
        PROXY_KEEP_USER: "1",
      },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const waitFor = async (wanted: Record<string, string>) => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const now = await serverStates(socket).catch(() => ({}) as Awaited<ReturnType<typeof serverStates>>);
        if (Object.entries(wanted).every(([name, status]) => now[name]?.status === status)) return;
        if (Date.now() > deadline) throw new Error(`HAProxy's servers are ${JSON.stringify(now)}, not ${JSON.stringify(wanted)}`);
        await Bun.sleep(100);
      }
    };
    await waitFor({ importd1: "UP", importd2: "UP", importd3: "UP" });

    const base = `https://127.0.0.1:${port}/default`;
    const trust = { tls: { ca: authority.cert } };
    const send = async (n: number) => {
      const response = await postJson(base, "subareas", key, [{ id: `area-${n}`, name: `Area ${n}` }], {}, trust);
      expect(response.status).toBe(202);
      return ((await response.json()) as { id: number }).id;
    };
    const first = await Promise.all(Array.from({ length: 30 }, (_, n) => send(n)));

    // The third instance is stopped for an upgrade as the README says: drained in HAProxy first, then SIGTERM;
    // the imports go on through the other two, and HAProxy's checks see it gone.
    const stopping = instances[2]!;
    await adminCommand(socket, "disable server importd/importd3");
    await waitFor({ importd3: "MAINT" });
    stopping.proc.kill("SIGTERM");
    const during = await Promise.all(Array.from({ length: 30 }, (_, n) => send(100 + n)));
    expect(await stopping.proc.exited).toBe(0);
    await adminCommand(socket, "enable server importd/importd3");
    await waitFor({ importd1: "UP", importd2: "UP", importd3: "DOWN" });
    const after = await Promise.all(Array.from({ length: 30 }, (_, n) => send(200 + n)));

    for (const id of [...first, ...during, ...after]) expect((await waitForJob(base, key, id, 30_000, trust)).importJobStatus).toBe("Succeeded");
    // Round-robin: each instance accepted some of the first batch (each logs the jobs it accepted).
    for (const instance of instances.slice(0, 2)) instance.proc.kill("SIGTERM");
    const accepted = await Promise.all(instances.map(async (instance) => (await instance.proc.exited, (await instance.stderr).split("\n").filter((line) => line.includes('"msg":"job accepted"')).length)));
    expect(accepted.every((count) => count > 0)).toBe(true);
    expect(accepted.reduce((sum, count) => sum + count, 0)).toBe(90);
  }, 120_000);
}
