// The importd binaries a test run spawns (tests/run.ts, tests/measure-cpu.ts): built once for the run, as `npm run
// build` builds it (its script, with another --outfile), into a directory of their own. Tests that run importd as a
// process take it from TEST_IMPORTD_BINARY (`importdCommand` in tests/helpers/process.ts), so that they run what is
// shipped, and start it cheaper: `importd env list` 0.09 CPU-s against 0.25 from source, where Bun transpiles and
// links some 150 modules each time (some 900 processes a CI run). The second binary is the same program with
// tests/fixtures/with-test-hooks.ts as its main entry (TEST_IMPORTD_HOOKS_BINARY, `withTestHooks`): the chaos
// tests' servers, which read the hooks' IMPORTD_TEST_* variables. A test file run by itself (`bun test FILE`)
// spawns importd from source, as before.
import { chmodSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const root = join(import.meta.dir, "..");

export function buildImportdForTests(): { binary: string; dir: string; env: { TEST_IMPORTD_BINARY: string; TEST_IMPORTD_HOOKS_BINARY: string } } {
  const dir = mkdtempSync(join(tmpdir(), "importd-binary-"));
  // Readable by the user the certificate tests start it as (nobody).
  chmodSync(dir, 0o755);
  const binary = join(dir, "importd");
  const withTestHooks = join(dir, "importd-with-test-hooks");
  buildImportd(binary);
  // --root src: the worker threads' entries where src/server.ts looks for them (/$bunfs/root/worker/thread.js),
  // as in the shipped build, whose entries all sit under src/; the hooks' entry is outside it.
  buildImportd(withTestHooks, (script) => replaced(script, /\bsrc\/main\.ts\b/, "--root src tests/fixtures/with-test-hooks.ts"));
  return { binary, dir, env: { TEST_IMPORTD_BINARY: binary, TEST_IMPORTD_HOOKS_BINARY: withTestHooks } };
}

/** Builds importd to `outfile` by package.json's build script, changed by `edit` first (the bench builds variants). */
export function buildImportd(outfile: string, edit: (script: string) => string = (script) => script): void {
  const script: string = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).scripts.build;
  const command = replaced(edit(script), /--outfile \S+/, `--outfile ${outfile}`);
  const built = Bun.spawnSync(["sh", "-c", command], { cwd: root, env: { ...process.env, PATH: `${join(root, "node_modules", ".bin")}:${process.env.PATH}` }, stdout: "pipe", stderr: "pipe" });
  if (built.exitCode !== 0) throw new Error(`building importd failed (${command}):\n${built.stdout}\n${built.stderr}`);
}

/** `script` with `pattern` replaced; a script without it is a build script this file no longer understands. */
function replaced(script: string, pattern: RegExp, replacement: string): string {
  if (!pattern.test(script)) throw new Error(`package.json's build script has no ${pattern} to replace: ${script}`);
  return script.replace(pattern, replacement);
}
