// What the command-line tests share (tests/cli/cli.test.ts, usage.test.ts): data directories removed after the file,
// a command that must succeed, and how its output is read.
import { afterAll, expect } from "bun:test";
import { rmSync } from "node:fs";
import { importd } from "./process";
import { tempDir } from "./server";

/** Spawning Bun and opening a database takes a moment; a test here runs a few commands. */
export const cliTimeoutMs = 30_000;

/** A fresh data directory per call, all removed after the calling test file (call it at the file's top level). */
export function cliDataDirs(): () => string {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  return () => {
    const dir = tempDir("importd-cli-");
    dirs.push(dir);
    return dir;
  };
}

/** Runs a command that must succeed and returns its stdout. */
export async function ok(args: string[], env: Record<string, string> = {}): Promise<string> {
  const run = await importd(args, env);
  if (run.code !== 0) throw new Error(`importd ${args.join(" ")} exited ${run.code}: ${run.stderr}`);
  return run.stdout;
}

export const noStackTrace = (stderr: string) => expect(stderr).not.toMatch(/^\s+at /m);
export const environmentsIn = (stdout: string) => stdout.trim().split("\n").filter(Boolean).map((line) => line.split("\t")[0]);
