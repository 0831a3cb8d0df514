import { afterAll, expect, test } from "bun:test";
import { chmodSync, readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { projectRoot, spawnServer, type Launch, type ServerProcess, importdCommand } from "../helpers/process";
import { tempDir } from "../helpers/server";

// The data directory is importd's user's alone (DECISIONS 15): 0700, and every file importd makes in it 0600, with
// the umask most machines have (022), for the server (its database, -wal and -shm, lock, pid, self-signed TLS key and
// certificate) and the CLI beside it. One an older importd left looser is tightened at start, and the log says so.

const dirs: string[] = [];
const servers: ServerProcess[] = [];
afterAll(() => {
  for (const server of servers) server.proc.kill("SIGKILL");
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

// importd from source under `umask 022`, whatever the test runner's umask.
const withUmask022: Launch = { command: ["sh", "-c", 'umask 022 && exec "$0" "$@"', ...importdCommand], cwd: projectRoot };

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([...withUmask022.command, ...args], { cwd: projectRoot, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

/** Every directory and file under `dir`, with its permission bits. */
function modes(dir: string): Record<string, string> {
  const found: Record<string, string> = { ".": (statSync(dir).mode & 0o777).toString(8) };
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const path = join(entry.parentPath, entry.name);
    found[path.slice(dir.length + 1)] = (statSync(path).mode & 0o777).toString(8);
  }
  return found;
}
const wrongModes = (dir: string) => Object.entries(modes(dir)).filter(([path, mode]) => mode !== (statSync(join(dir, path)).isDirectory() ? "700" : "600"));

async function stop(server: ServerProcess): Promise<string> {
  server.proc.kill("SIGTERM");
  expect(await server.proc.exited).toBe(0);
  return `${server.stdout.join("\n")}\n${await server.stderr}`;
}

test("a fresh data directory, under umask 022: the server and `importd env create` make it 0700 and every file in it 0600", async () => {
  const parent = tempDir("importd-modes-");
  dirs.push(parent);
  const dataDir = join(parent, "data");
  // On an address other than loopback, so that the self-signed certificate and its key are made too.
  const server = await spawnServer(dataDir, ["--host", "0.0.0.0"], 30_000, withUmask022);
  servers.push(server);
  const created = await cli(["env", "create", "acme-widgets", "--data-dir", dataDir]);
  expect(created.code).toBe(0);
  const running = modes(dataDir);
  // What there is to judge, on SQLite: the database and its WAL files, the lock, and the TLS folder.
  if (!process.env.TEST_BACKEND || process.env.TEST_BACKEND === "sqlite") {
    expect(Object.keys(running)).toEqual(expect.arrayContaining(["importd.sqlite", "importd.sqlite-wal", "importd.sqlite-shm", "server.lock", "server.pid"]));
  }
  expect(Object.keys(running)).toEqual(expect.arrayContaining(["tls", join("tls", "importd.key"), join("tls", "importd.crt")]));
  expect(wrongModes(dataDir)).toEqual([]);
  await stop(server);
  expect(wrongModes(dataDir)).toEqual([]);
}, 60_000);

test("a data directory an older importd left 0755 with 0644 files is tightened at start, and the log says what was changed", async () => {
  const dataDir = tempDir("importd-modes-old-");
  dirs.push(dataDir);
  await stop(await spawnServer(dataDir, ["--host", "0.0.0.0"], 30_000, withUmask022));
  chmodSync(dataDir, 0o755);
  chmodSync(join(dataDir, "tls"), 0o755);
  for (const path of Object.keys(modes(dataDir))) if (!statSync(join(dataDir, path)).isDirectory()) chmodSync(join(dataDir, path), 0o644);
  expect(wrongModes(dataDir).length).toBeGreaterThan(2);

  const server = await spawnServer(dataDir, ["--host", "0.0.0.0"], 30_000, withUmask022);
  servers.push(server);
  expect(wrongModes(dataDir)).toEqual([]);
  const output = await stop(server);
  expect(output).toContain("took group and other permissions off the data directory");
  expect(output).toContain(`${dataDir} 0755 → 0700`);
}, 60_000);
