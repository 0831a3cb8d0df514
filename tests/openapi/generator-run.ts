import { join } from "node:path";
import { projectRoot } from "../helpers/process";

// What the two generated-client tests share: running a tool in the client's directory, and holding the
// walk-through written against the generated code to `tsc --strict` with not a single cast.

/** Runs `command` in `dir` to its end: its exit code and everything it printed. */
export async function runIn(dir: string, command: string[]): Promise<{ code: number; output: string }> {
  const proc = Bun.spawn(command, { cwd: dir, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, output: `${stdout}${stderr}` };
}

/** `tsc -p tsconfig.json` in `dir`: what it printed (nothing, when the code typechecks). */
export const typecheck = (dir: string) => runIn(dir, [process.execPath, join(projectRoot, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"]);

/** The walk-through's code without its comment lines, to look for casts in. */
export async function codeWithoutComments(walkthrough: string): Promise<string> {
  return (await Bun.file(walkthrough).text()).split("\n").filter((line) => !line.trim().startsWith("//")).join("\n");
}

/** A cast, a conversion that hides a wrong type, or a non-null assertion. */
export const cast = /\bas (?!const\b)[A-Za-z{[(]|String\(id\)|Number\(|<any>|!\./;
