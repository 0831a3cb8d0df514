// `npm run test:cpu -- OUT [--pass NAME]... [--side-by-side N]`: the CPU seconds of every test file of every pass (or of
// the passes named), each file run by itself (`bun test FILE` in its pass's environment) in a cgroup of its own, so
// that what it starts (servers, commands, PostgreSQL, Chromium, killed or not) is counted with it. Writes one JSON
// line per file to OUT ({ pass, file, cpu, wall, failed }) and prints the files by CPU, then each pass's sum.
//
// CI is bound by CPU (tests/run.ts prints how busy it kept the machine): these sums, not wall times taken side by
// side, say what a change to the tests saves. Needs root and cgroup v1's cpuacct (/sys/fs/cgroup/cpuacct), as on the
// developers' machines; N files run side by side (2 by default), which moves a reading by some 10%, not its sum.
import { appendFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { buildImportdForTests } from "./binary-for-tests";
import { passes } from "./passes";

const cgroups = "/sys/fs/cgroup/cpuacct";
const { values, positionals } = parseArgs({ options: { pass: { type: "string", multiple: true }, "side-by-side": { type: "string", default: "2" } }, allowPositionals: true });
const out = positionals[0];
if (!out || !existsSync(cgroups)) {
  console.error(`usage: bun tests/measure-cpu.ts OUT [--pass NAME]... [--side-by-side N] (as root, with ${cgroups})`);
  process.exit(2);
}
writeFileSync(out, "");

/** Every test file under tests/, as the SQLite pass (files: []) runs them. */
function everyFile(dir = "tests"): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "fixtures" ? [] : everyFile(path);
    return /\.test\.tsx?$/.test(entry.name) ? [`./${path}`] : [];
  });
}

// As npm test runs them: importd spawned from the binary built for the run (tests/binary-for-tests.ts).
const built = buildImportdForTests();
Object.assign(process.env, built.env);

type Run = { pass: string; file: string; env: Record<string, string>; preload: string[] };
const runs: Run[] = [];
const tearDowns: Array<() => void> = [];
for (const pass of passes.filter((pass) => !values.pass || values.pass.includes(pass.name))) {
  const { env, tearDown } = await pass.setUp();
  tearDowns.push(tearDown);
  const ignored = (file: string) => (pass.ignore ?? []).some((ignore) => file.endsWith(ignore.replace(/^\.\//, "")));
  const files = pass.files.length > 0 ? pass.files : everyFile().sort().filter((file) => !ignored(file));
  for (const file of files) runs.push({ pass: pass.name, file, env, preload: pass.preload ?? [] });
}

type Measured = { pass: string; file: string; cpu: number; wall: number; failed: number };
async function measure(run: Run, n: number): Promise<Measured> {
  const group = join(cgroups, `importd-measure-${process.pid}-${n}`);
  mkdirSync(group);
  const started = performance.now();
  const args = ["test", "--timeout", "60000", ...run.preload.flatMap((module) => ["--preload", module]), run.file];
  // The shell joins the cgroup, then becomes bun: everything bun starts is in it from its first instruction.
  const proc = Bun.spawn(["sh", "-c", `echo $$ > ${group}/cgroup.procs && exec "$0" "$@"`, process.execPath, ...args], {
    env: { ...process.env, CI: "1", ...run.env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  const wall = (performance.now() - started) / 1000;
  // What a test killed may take a moment to leave; its CPU counts either way.
  for (let wait = 0; wait < 50 && readFileSync(join(group, "cgroup.procs"), "utf8").trim() !== ""; wait++) await Bun.sleep(100);
  const cpu = Number(readFileSync(join(group, "cpuacct.usage"), "utf8")) / 1e9;
  rmdirSync(group);
  const failed = Number(`${stdout}${stderr}`.match(/^\s*(\d+) fail$/m)?.[1] ?? 1);
  return { pass: run.pass, file: run.file, cpu: Math.round(cpu * 10) / 10, wall: Math.round(wall), failed };
}

const measured: Measured[] = [];
const queue = runs.map((run, n) => ({ run, n }));
await Promise.all(
  Array.from({ length: Number(values["side-by-side"]) }, async () => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      const result = await measure(next.run, next.n);
      measured.push(result);
      appendFileSync(out, `${JSON.stringify(result)}\n`);
    }
  }),
);
for (const tearDown of tearDowns) tearDown();
rmSync(built.dir, { recursive: true, force: true });

for (const { cpu, wall, pass, file, failed } of measured.sort((a, b) => b.cpu - a.cpu)) {
  console.log(`${cpu.toFixed(1).padStart(6)} CPU-s ${String(wall).padStart(4)} s  ${pass.padEnd(8)} ${file}${failed ? `  (${failed} failed)` : ""}`);
}
const sums = new Map<string, number>();
for (const { pass, cpu } of measured) sums.set(pass, (sums.get(pass) ?? 0) + cpu);
for (const [pass, cpu] of sums) console.log(`pass ${pass}: ${Math.round(cpu)} CPU-s`);
console.log(`all: ${Math.round(measured.reduce((sum, { cpu }) => sum + cpu, 0))} CPU-s over ${measured.length} files`);
