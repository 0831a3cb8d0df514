import { afterAll, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { importd, spawnServer, type ServerProcess } from "../helpers/process";
import { tempDir } from "../helpers/server";

// One server per SQLite data directory (DECISIONS section 8): the scheduler, the write lock between threads
// and the parse-once cache assume that no other process applies the database's jobs.

const dirs: string[] = [];
const servers: ServerProcess[] = [];
afterAll(() => {
  for (const server of servers) server.proc.kill("SIGKILL");
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
const dataDir = () => {
  const dir = tempDir("importd-lock-");
  dirs.push(dir);
  return dir;
};
const start = async (dir: string) => {
  const server = await spawnServer(dir, ["--workers", "1"]);
  servers.push(server);
  return server;
};

async function expectUp(server: ServerProcess, key: string) {
  expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  expect((await fetch(`${server.url}/default/v2/jobs`, { headers: { "api-key": key } })).status).toBe(200);
}

test("a second server on the same data directory refuses with one line naming the directory and the running pid, exit 1; the first runs on", async () => {
  const dir = dataDir();
  const first = await start(dir);
  const key = first.firstRunKey!;

  const second = await importd(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dir]);
  expect(second.code).toBe(1);
  expect(second.stdout).toBe("");
  const lines = second.stderr.trimEnd().split("\n");
  expect(lines).toEqual([
    `importd: another importd server (pid ${first.proc.pid}) is already running on the data directory ${dir}; stop it first, or start this one with another --data-dir (the env and key commands work beside a running server)`,
  ]);

  // Untouched: still serving, and the first-run key it printed still works.
  await expectUp(first, key);
  expect(first.proc.exitCode).toBeNull();
});

test("the env and key commands work beside a running server", async () => {
  const dir = dataDir();
  const server = await start(dir);
  expect((await importd(["env", "create", "acme", "--data-dir", dir])).code).toBe(0);
  const created = await importd(["key", "create", "acme", "--data-dir", dir]);
  expect(created.code).toBe(0);
  const key = created.stdout.trim();
  expect((await fetch(`${server.url}/acme/v2/jobs`, { headers: { "api-key": key } })).status).toBe(200);
});

test("a server killed with SIGKILL leaves no lock that stops the next start", async () => {
  const dir = dataDir();
  const killed = await start(dir);
  const key = killed.firstRunKey!;
  killed.proc.kill("SIGKILL");
  await killed.proc.exited;
  // Its PID file is still there; the lock itself went with the process.
  expect(readFileSync(join(dir, "server.pid"), "utf8").trim()).toBe(String(killed.proc.pid));

  const next = await start(dir);
  await expectUp(next, key);
  expect(readFileSync(join(dir, "server.pid"), "utf8").trim()).toBe(String(next.proc.pid));
});

test("a clean stop releases the lock and removes the PID file", async () => {
  const dir = dataDir();
  const server = await start(dir);
  server.proc.kill("SIGTERM");
  expect(await server.proc.exited).toBe(0);
  expect(existsSync(join(dir, "server.pid"))).toBe(false);
  const again = await start(dir);
  expect((await fetch(`${again.url}/healthz`)).status).toBe(200);
});
