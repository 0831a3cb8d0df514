// Preloaded by every `bun test` (bunfig.toml): each temp directory a test makes is removed after its file, whatever
// the test did with it. Left to each test to remember, store tests' databases and servers' data directories kept
// some 2 GB a day of runs in /tmp. (`bun test` runs no process exit handler, hence a hook of its own.)
import { afterAll } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const made = new Set<string>();

export function tempDir(prefix = "importd-test-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.add(dir);
  return dir;
}

afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
  made.clear();
});
