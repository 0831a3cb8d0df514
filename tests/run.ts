// `npm test`: every pass of tests/passes.ts side by side, each in a `bun test` of its own (with --parallel processes), then
// the passes that run alone (`alone` in tests/passes.ts)
// (each test file has its own temp directory, ports and database, and each process its own PostgreSQL server, so
// they do not meet). Each process's output is printed whole when it ends, then one line per pass, then the total;
// exits non-zero if any pass failed, so that a failure in one pass never hides another.
//
//   bun tests/run.ts [--pass NAME]... [--long] [--measure DIR] [-- bun test arguments]
//
// --pass runs only the passes named; --long runs the long suites at their full settings instead (`npm run test:long`,
// see longSettings in tests/passes.ts); --measure writes each pass's per-file durations to DIR/<pass>.json.
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildImportdForTests } from "./binary-for-tests";
import { longFiles, longSettings, passes, SkippedPass, type Pass } from "./passes";

const root = join(import.meta.dir, "..");
/** Per-file durations from an earlier run (`npm run test:timings`): `--parallel` starts the slowest first. */
const timings = join(root, "tests", "timings.json");

export type PassResult = {
  name: string;
  passed: number;
  failed: number;
  seconds: number;
  status: "passed" | "failed" | "skipped";
  why?: string;
  /** Each failed test's "(fail)" line, after what bun printed for it (see failures()). */
  failures?: string[];
};

/** Bun's closing lines, ` 123 pass` and ` 4 fail`, summed over what one process printed. */
export function counts(output: string): { passed: number; failed: number } {
  const sum = (word: string) => [...output.matchAll(new RegExp(`^\\s*(\\d+) ${word}$`, "gm"))].reduce((total, match) => total + Number(match[1]), 0);
  return { passed: sum("pass"), failed: sum("fail") };
}

/**
 * Each failed test of what one process printed: its "(fail)" line, after the lines bun printed for it since the
 * test before (its error and stack, at most `maxLines` of the last of them). Printed again at the end of the run, so
 * that the tail of a long log (all a CI page may keep) names what failed.
 */
export function failures(output: string, maxLines = 40): string[] {
  const found: string[] = [];
  let since: string[] = [];
  for (const line of output.split("\n")) {
    // Bun's own summary at the end of a --parallel run lists the failed tests' lines once more.
    if (/^\d+ tests? failed:$/.test(line)) break;
    if (line.startsWith("(fail)")) {
      found.push([...since.slice(-maxLines), line].join("\n"));
      since = [];
    } else if (line.startsWith("(pass)") || line.startsWith("(skip)") || line.startsWith("(todo)") || /^\S.*\.test\.tsx?:$/.test(line)) since = [];
    else since.push(line);
  }
  return found;
}

/**
 * Runs one pass to its end. `print` gets its output when it ends (all of it together, so that passes
 * running side by side do not interleave); without it, the output goes straight to this process's.
 */
export async function runPass(pass: Pass, options: { args?: string[]; long?: boolean; measure?: string; print?: (text: string) => void } = {}): Promise<PassResult> {
  const started = performance.now();
  const seconds = () => Math.round((performance.now() - started) / 1000);
  let files = pass.files;
  let processes = pass.processes;
  if (options.long) {
    files = longFiles[pass.name] ?? [];
    processes = 1;
    if (files.length === 0) return { name: pass.name, passed: 0, failed: 0, seconds: 0, status: "skipped", why: "no long suite" };
  }
  let setUp: Awaited<ReturnType<Pass["setUp"]>>;
  try {
    setUp = await pass.setUp();
  } catch (error) {
    if (error instanceof SkippedPass) return { name: pass.name, passed: 0, failed: 0, seconds: 0, status: "skipped", why: error.message };
    throw error;
  }
  const logs = mkdtempSync(join(tmpdir(), `importd-pass-${pass.name}-`));
  try {
    // --measure: the pass writes its files' durations to a file of its own (bun writes to the first --timings).
    const measured = options.measure ? join(options.measure, `${pass.name}.json`) : undefined;
    if (measured) writeFileSync(measured, JSON.stringify({ version: 1, files: {} }));
    // Several processes take the files from one list, the slowest first (by tests/timings.json), each the next as it
    // is free; --no-isolate: a process runs its files one after another as a single `bun test` would (with one
    // PostgreSQL server of its own for all of them), instead of a fresh process state for each file.
    const args = [
      ...(measured ? [`--timings=${measured}`, "--update-timings"] : []),
      ...(processes > 1 ? [`--parallel=${processes}`, "--no-isolate"] : []),
      ...(pass.preload ?? []).map((module) => `--preload=${module}`),
      ...(files.length === 0 ? (pass.ignore ?? []).map((pattern) => `--path-ignore-patterns=${pattern}`) : []),
      `--timings=${timings}`,
      ...files,
      ...(options.args ?? []),
    ];
    const env = { ...process.env, ...setUp.env, ...(options.long ? longSettings : {}) };
    // bunfig.toml's timeout is the tests'; hooks take the command line's (they start PostgreSQL and servers, which
    // takes more than bun's 5 s on a machine that runs the passes side by side).
    const command = [process.execPath, "test", "--timeout", options.long ? "7200000" : "60000", ...args];
    if (!options.print) {
      const proc = Bun.spawn(command, { cwd: root, env, stdio: ["inherit", "inherit", "inherit"] });
      const code = await proc.exited;
      return { name: pass.name, passed: 0, failed: 0, seconds: seconds(), status: code === 0 ? "passed" : "failed" };
    }
    const log = join(logs, "output.log");
    const fd = openSync(log, "w");
    const proc = Bun.spawn(command, { cwd: root, env, stdio: ["ignore", fd, fd] });
    const code = await proc.exited;
    closeSync(fd);
    const output = readFileSync(log, "utf8");
    options.print(`\n===== ${pass.name}: ${command.slice(1).join(" ").slice(0, 300)}\n${output}===== ${pass.name} exited ${code} after ${seconds()} s\n`);
    const { passed, failed } = counts(output);
    const ok = code === 0 && failed === 0 && passed > 0;
    return { name: pass.name, passed, failed, seconds: seconds(), status: ok ? "passed" : "failed", failures: failures(output) };
  } finally {
    setUp.tearDown();
    rmSync(logs, { recursive: true, force: true });
  }
}

/** The line a pass ends with, which .ci/run adds up: `pass postgres: passed, 812 pass, 0 fail, 190 s`. */
export const resultLine = (result: PassResult) =>
  result.status === "skipped"
    ? `pass ${result.name}: skipped (${result.why})`
    : `pass ${result.name}: ${result.status}, ${result.passed} pass, ${result.failed} fail, ${result.seconds} s`;

/** The machine's CPU time so far, busy and all, in seconds (Linux's /proc/stat; undefined elsewhere). */
function cpuSeconds(): { busy: number; total: number } | undefined {
  try {
    const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
    const total = fields.reduce((sum, value) => sum + value, 0);
    // idle and iowait are the 4th and 5th: the cores had nothing to run.
    const busy = total - fields[3]! - (fields[4] ?? 0);
    return { busy: busy / 100, total: total / 100 };
  } catch {
    return undefined;
  }
}

if (import.meta.main) {
  const argv = process.argv.slice(2);
  const dashes = argv.indexOf("--");
  const own = dashes < 0 ? argv : argv.slice(0, dashes);
  const args = dashes < 0 ? [] : argv.slice(dashes + 1);
  const long = own.includes("--long");
  const measure = own.flatMap((arg, i) => (own[i - 1] === "--measure" ? [arg] : []))[0];
  if (measure) mkdirSync(measure, { recursive: true });
  const named = own.flatMap((arg, i) => (own[i - 1] === "--pass" ? [arg] : []));
  const unknown = named.filter((name) => !passes.some((pass) => pass.name === name));
  if (unknown.length > 0) throw new Error(`no pass named ${unknown.join(", ")}: the passes are ${passes.map((pass) => pass.name).join(", ")}`);
  const chosen = named.length > 0 ? passes.filter((pass) => named.includes(pass.name)) : passes;
  const started = performance.now();
  const cpuBefore = cpuSeconds();
  // Every pass spawns this binary where a test runs importd as a process (tests/binary-for-tests.ts).
  const built = buildImportdForTests();
  Object.assign(process.env, built.env);
  console.log(`running ${chosen.map((pass) => `${pass.name}${pass.processes > 1 && !long ? ` (${pass.processes} processes)` : ""}`).join(", ")} side by side${long ? ", long suites at full settings" : ""}`);
  const run = (pass: Pass) =>
    runPass(pass, { args, long, measure, print: (text) => process.stdout.write(text) }).catch((error): PassResult => {
      console.error(`pass ${pass.name} could not run: ${error instanceof Error ? error.stack : error}`);
      return { name: pass.name, passed: 0, failed: 0, seconds: 0, status: "failed" };
    });
  const results = await Promise.all(chosen.filter((pass) => !pass.alone).map(run));
  for (const pass of chosen.filter((pass) => pass.alone)) results.push(await run(pass));
  rmSync(built.dir, { recursive: true, force: true });
  console.log("");
  for (const result of results) {
    for (const failure of result.failures ?? []) console.log(`===== failed in pass ${result.name}:\n${failure}\n`);
  }
  for (const result of results) console.log(resultLine(result));
  console.log(`all passes: ${Math.round((performance.now() - started) / 1000)} s`);
  // How much of the machine the run kept busy: what says whether more processes or less work would make it shorter.
  const cpuAfter = cpuSeconds();
  if (cpuBefore && cpuAfter) {
    const busy = cpuAfter.busy - cpuBefore.busy;
    console.log(`machine: ${Math.round(busy)} s of CPU busy, ${Math.round((100 * busy) / (cpuAfter.total - cpuBefore.total))}% of its cores' time`);
  }
  process.exitCode = results.some((result) => result.status === "failed") ? 1 : 0;
}
