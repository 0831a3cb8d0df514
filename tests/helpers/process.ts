import type { Subprocess } from "bun";
import { Database } from "bun:sqlite";
import { databaseFile } from "../../src/store/sqlite/database";
import { join, resolve } from "node:path";
import { keepFreedMemory } from "../passes";
import { testBackend, testTls } from "./backend";
import { freshPostgresDatabase } from "./postgres-store";
import { testSql } from "./sql";

export const projectRoot = join(import.meta.dir, "..", "..");

export type ServerProcess = {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  url: string;
  /** Printed on a first run only. */
  firstRunKey?: string;
  stdout: string[];
  /** Everything the server wrote on stderr (its log), once it has exited. */
  stderr: Promise<string>;
  /** Its log so far, one line each (to wait for a line with tests/helpers/until.ts). */
  stderrLines: string[];
};

// The runner's own IMPORTD_* variables must not leak into the commands under test.
const cleanEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("IMPORTD_")));

export type Run = { code: number; stdout: string; stderr: string };

// On PostgreSQL (TEST_BACKEND=postgres), a data directory stands for a database of its own: a server or command
// given --data-dir also gets the --database-url of the database made for that directory on first use, so that
// a test that restarts a server on its directory, or runs the CLI on it, finds the same data.
const databases = new Map<string, Promise<string>>();

async function onTestBackend(args: string[]): Promise<string[]> {
  // Over TLS (TEST_TRANSPORT=tls), a server the test starts on loopback serves the tests' certificate.
  if (testTls && args[0] === "serve" && !args.some((arg) => ["--tls-cert", "--insecure-http", "0.0.0.0"].includes(arg))) args = [...args, "--tls-cert", testTls.cert, "--tls-key", testTls.key];
  const at = args.indexOf("--data-dir");
  if (testBackend !== "postgres" || at < 0 || args[at + 1] === undefined || args.includes("--database-url")) return args;
  const dir = resolve(args[at + 1]!);
  let url = databases.get(dir);
  if (!url) databases.set(dir, (url = freshPostgresDatabase().then((database) => database.url)));
  return [...args, "--database-url", await url];
}

/**
 * Runs one SQL statement (`?` placeholders) on the store of the server that ran on `dataDir`, as another process
 * would: its SQLite file, or on PostgreSQL its database. Numbers come back as numbers on both.
 */
export async function queryStore<T>(dataDir: string, text: string, ...params: unknown[]): Promise<T[]> {
  if (testBackend === "sqlite") {
    const db = new Database(databaseFile(dataDir), { readonly: true, strict: true });
    try {
      return db.query(text).all(...(params as never[])) as T[];
    } finally {
      db.close();
    }
  }
  const url = databases.get(resolve(dataDir));
  if (!url) throw new Error(`no server or command has run on ${dataDir}`);
  const sql = testSql(await url);
  try {
    let n = 0;
    return await sql.unsafe<T>(text.replace(/\?/g, () => `$${++n}`), params);
  } finally {
    await sql.end();
  }
}

/** Runs one importd command from source to its end (on PostgreSQL under TEST_BACKEND=postgres: see above). */
export async function importd(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const proc = Bun.spawn([...importdCommand, ...(await onTestBackend(args))], { cwd: projectRoot, env: { ...cleanEnv, ...env }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

/**
 * How the tests run importd as a process: the binary `npm test` built for its run (TEST_IMPORTD_BINARY, see
 * tests/binary-for-tests.ts), as shipped; from source with this Bun when a test file is run by itself.
 */
export const importdCommand: string[] = process.env.TEST_IMPORTD_BINARY ? [process.env.TEST_IMPORTD_BINARY] : [process.execPath, "src/main.ts"];

/** How to run importd: importdCommand by default, from source with test hooks, or a compiled binary in its own directory. */
export type Launch = { command: string[]; cwd: string; env?: Record<string, string> };
const asTested: Launch = { command: importdCommand, cwd: projectRoot };

/**
 * The environment of a process whose memory a test reads: the runner's (less its IMPORTD_* variables) without the
 * allocator setting of the passes that keep freed memory (keepFreedMemory in tests/passes.ts), so that the process
 * gives memory back as the shipped program does, and what the test reads is what an operator would see.
 */
export const shippedEnv = Object.fromEntries(Object.entries(cleanEnv).filter(([name]) => !(name in keepFreedMemory))) as Record<string, string>;
/** With the shipped allocator setting (see shippedEnv): for a server whose memory the test reads. */
export const asShipped: Launch = { ...asTested, env: shippedEnv };

/**
 * importd with test hooks, with these variables on top of the runner's own (less its IMPORTD_* ones): an
 * IMPORTD_TEST_* variable, which only tests/fixtures/with-test-hooks.ts reads (the shipped program does not). The
 * binary `npm test` built of it (TEST_IMPORTD_HOOKS_BINARY, see tests/binary-for-tests.ts), or that file from source.
 */
export const withTestHooks = (env: Record<string, string>): Launch => ({
  command: process.env.TEST_IMPORTD_HOOKS_BINARY ? [process.env.TEST_IMPORTD_HOOKS_BINARY] : [process.execPath, "tests/fixtures/with-test-hooks.ts"],
  cwd: projectRoot,
  env: { ...cleanEnv, ...env } as Record<string, string>,
});

/** Starts `importd serve` as its own process (so it can be killed) and waits until it listens. */
export async function spawnServer(dataDir: string, extraArgs: string[] = [], timeoutMs = 30_000, launch: Launch = asTested): Promise<ServerProcess> {
  const args = await onTestBackend(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir, ...extraArgs]);
  const proc = Bun.spawn([...launch.command, ...args], {
    cwd: launch.cwd,
    ...(launch.env ? { env: launch.env } : {}),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const stdout: string[] = [];
  const stderrLines: string[] = [];
  const stderr = (async () => {
    const decoder = new TextDecoder();
    let text = "";
    let partial = "";
    for await (const chunk of proc.stderr) {
      const piece = decoder.decode(chunk, { stream: true });
      text += piece;
      const lines = (partial + piece).split("\n");
      partial = lines.pop()!;
      stderrLines.push(...lines);
    }
    return text + decoder.decode();
  })();
  const reader = proc.stdout.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const match = stdout.join("\n").match(/listening on (https?:\/\/\S+)/);
    if (match) {
      const key = stdout.join("\n").match(/^\s+([0-9a-f]{64}_\d+)$/m)?.[1];
      // Keep draining so the child never blocks on a full pipe.
      void (async () => {
        for (;;) {
          const { done } = await reader.read().catch(() => ({ done: true }));
          if (done) return;
        }
      })();
      return { proc, url: match[1]!, firstRunKey: key, stdout, stderr, stderrLines };
    }
    if (Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`server did not start: ${stdout.join("\n")}\n${await stderr}`);
    }
    const { done, value } = await reader.read();
    if (done) throw new Error(`server exited before listening (code ${await proc.exited}): ${stdout.join("\n")}\n${await stderr}`);
    buffered += decoder.decode(value, { stream: true });
    const lines = buffered.split("\n");
    buffered = lines.pop()!;
    stdout.push(...lines);
  }
}
