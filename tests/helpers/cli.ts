// What the command-line tests share (tests/cli/cli.test.ts, usage.test.ts): data directories, a command that must
// succeed, and how its output is read.
import { expect } from "bun:test";
import { importd } from "./process";
import { tempDir } from "./server";

/** Spawning Bun and opening a database takes a moment; a test here runs a few commands. */
export const cliTimeoutMs = 30_000;

/** A fresh data directory per call (removed after the calling test file, as every `tempDir` is). */
export const cliDataDirs = (): (() => string) => () => tempDir("importd-cli-");

/** Runs a command that must succeed and returns its stdout. */
export async function ok(args: string[], env: Record<string, string> = {}): Promise<string> {
  const run = await importd(args, env);
  if (run.code !== 0) throw new Error(`importd ${args.join(" ")} exited ${run.code}: ${run.stderr}`);
  return run.stdout;
}

export const noStackTrace = (stderr: string) => expect(stderr).not.toMatch(/^\s+at /m);
export const environmentsIn = (stdout: string) => stdout.trim().split("\n").filter(Boolean).map((line) => line.split("\t")[0]);
