import type { Subprocess } from "bun";
import { join } from "node:path";

export const projectRoot = join(import.meta.dir, "..", "..");

export type ServerProcess = {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  url: string;
  /** Printed on a first run only. */
  firstRunKey?: string;
  stdout: string[];
  /** Everything the server wrote on stderr (its log), once it has exited. */
  stderr: Promise<string>;
};

// The runner's own IMPORTD_* variables must not leak into the commands under test.
const cleanEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("IMPORTD_")));

export type Run = { code: number; stdout: string; stderr: string };

/** Runs one importd command from source to its end. */
export async function importd(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const proc = Bun.spawn([process.execPath, "src/main.ts", ...args], { cwd: projectRoot, env: { ...cleanEnv, ...env }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

/** How to run importd: from source with this Bun by default, or a compiled binary in its own directory. */
export type Launch = { command: string[]; cwd: string; env?: Record<string, string> };
const fromSource: Launch = { command: [process.execPath, "src/main.ts"], cwd: projectRoot };

/** From source, with these variables on top of the runner's own (less its IMPORTD_* ones), e.g. a test hook. */
export const fromSourceWith = (env: Record<string, string>): Launch => ({ ...fromSource, env: { ...cleanEnv, ...env } as Record<string, string> });

/** Starts `importd serve` as its own process (so it can be killed) and waits until it listens. */
export async function spawnServer(dataDir: string, extraArgs: string[] = [], timeoutMs = 30_000, launch: Launch = fromSource): Promise<ServerProcess> {
  const proc = Bun.spawn([...launch.command, "serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir, ...extraArgs], {
    cwd: launch.cwd,
    ...(launch.env ? { env: launch.env } : {}),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const stdout: string[] = [];
  const stderr = new Response(proc.stderr).text();
  const reader = proc.stdout.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const match = stdout.join("\n").match(/listening on (http:\/\/\S+)/);
    if (match) {
      const key = stdout.join("\n").match(/^\s+([0-9a-f]{64}_\d+)$/m)?.[1];
      // Keep draining so the child never blocks on a full pipe.
      void (async () => {
        for (;;) {
          const { done } = await reader.read().catch(() => ({ done: true }));
          if (done) return;
        }
      })();
      return { proc, url: match[1]!, firstRunKey: key, stdout, stderr };
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
