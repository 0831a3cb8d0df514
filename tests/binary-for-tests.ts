// The importd binary a test run spawns (tests/run.ts, tests/measure-cpu.ts): built once for the run, as `npm run
// build` builds it (its script, with another --outfile), into a directory of its own. Tests that run importd as a
// process take it from TEST_IMPORTD_BINARY (`importdCommand` in tests/helpers/process.ts), so that they run what is
// shipped, and start it in two thirds of the CPU: 0.21 CPU-s against 0.30 for a command, 0.61 against 0.96 for a
// server to its first answer (from source, Bun transpiles and links some 150 modules each time; some 900 processes
// a CI run). A test file run by itself (`bun test FILE`) spawns importd from source, as before.
import { chmodSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const root = join(import.meta.dir, "..");

export function buildImportdForTests(): { binary: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), "importd-binary-"));
  // Readable by the user the certificate tests start it as (nobody).
  chmodSync(dir, 0o755);
  const binary = join(dir, "importd");
  const script: string = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).scripts.build;
  const command = script.replace(/--outfile \S+/, `--outfile ${binary}`);
  if (command === script) throw new Error(`package.json's build script has no --outfile to replace: ${script}`);
  const build = Bun.spawnSync(["sh", "-c", command], { cwd: root, env: { ...process.env, PATH: `${join(root, "node_modules", ".bin")}:${process.env.PATH}` }, stdout: "pipe", stderr: "pipe" });
  if (build.exitCode !== 0) throw new Error(`building importd for the tests failed (${command}):\n${build.stdout}\n${build.stderr}`);
  return { binary, dir };
}
