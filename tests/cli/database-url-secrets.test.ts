import { expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { projectRoot, importdCommand } from "../helpers/process";
import { tempDir } from "../helpers/server";

// A password in a database URL, in its user part or as ?password=, is never shown (DECISIONS 15): not in an error
// message, not in a log line, whatever fails (nothing listening, an unknown host, an unreadable sslrootcert, a URL
// that cannot be parsed), from `serve`, `env` and `storage copy` alike.

const password = "hunter2secret";
const urls = [
  `postgres://importd:${password}@127.0.0.1:1/importd?password=${password}`,
  `postgres://importd@127.0.0.1:1/importd?sslmode=require&password=${password}`,
  `postgres://importd:${password}@nosuchhost.invalid/importd?password=${password}`,
  `postgres://importd:${password}@127.0.0.1:1/importd?password=${password}&sslmode=verify-full&sslrootcert=/nonexistent/ca.pem`,
  `postgres://importd:${password}@127.0.0.1:99999/importd?password=${password}`,
  `postgres://importd:${password}@[::1/importd?password=${password}`,
  `postgres://importd:hunter2%73ecret@127.0.0.1:1/importd?PassWord=hunter2%73ecret`,
];

async function run(args: string[], env: Record<string, string> = {}) {
  const cleanEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("IMPORTD_")));
  const proc = Bun.spawn([...importdCommand, ...args], { cwd: projectRoot, env: { ...cleanEnv, ...env }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 25_000);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code, output: `${stdout}\n${stderr}` };
}

test("no message and no log line shows the password, however the connection fails", async () => {
  const dataDir = tempDir("importd-url-secrets-");
  try {
    for (const url of urls) {
      const runs = await Promise.all([
        run(["serve", "--port", "0", "--data-dir", dataDir, "--database-url", url]),
        run(["serve", "--port", "0", "--data-dir", dataDir], { IMPORTD_DATABASE_URL: url }),
        run(["env", "list", "--database-url", url]),
        run(["env", "create", "acme", "--database-url", url]),
        run(["storage", "copy", "--data-dir", dataDir, "--to", url]),
      ]);
      for (const { code, output } of runs) {
        expect({ url, code: code !== 0 }).toEqual({ url, code: true });
        expect({ url, output, leaks: output.includes("hunter2") }).toEqual({ url, output, leaks: false });
      }
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 120_000);
