import { afterAll, expect, test } from "bun:test";
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { projectRoot, spawnServer, type ServerProcess, importdCommand } from "../helpers/process";
import { asset, seedReferenceData } from "../helpers/records";
import { tempDir } from "../helpers/server";

const dir = tempDir("importd-lost-");
let server: ServerProcess | undefined;
afterAll(async () => {
  server?.proc.kill("SIGKILL");
  await server?.proc.exited;
  rmSync(dir, { recursive: true, force: true });
});

const cleanEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("IMPORTD_")));
const jobsIn = async (base: string, key: string) => {
  const page = (await (await fetch(`${base}/v2/jobs?limit=1000`, { headers: { "api-key": key } })).json()) as { items: unknown[] };
  return page.items.length;
};

test("losing the server mid-import says what happened and that the same command resumes; it does, applying no request twice", async () => {
  const dataDir = join(dir, "data");
  server = await spawnServer(dataDir);
  const key = server.firstRunKey!;
  const port = new URL(server.url).port;
  const base = `${server.url}/default`;
  await seedReferenceData(base, key);
  const referenceJobs = await jobsIn(base, key);

  const file = join(dir, "lost.ndjson");
  writeFileSync(file, Array.from({ length: 3000 }, (_, i) => JSON.stringify(asset(i))).join("\n"));
  const command = [...importdCommand, "import", file, "--resource", "assets", "--base-url", base, "--chunk-bytes", "40000"];
  const proc = Bun.spawn(command, { cwd: projectRoot, env: { ...cleanEnv, IMPORTD_API_KEY: key }, stdout: "pipe", stderr: "pipe" });

  // Kill the server once a few jobs are done (the plain progress line comes once per finished job).
  const reader = proc.stderr.getReader();
  let stderr = "";
  while ((stderr.match(/records sent/g) ?? []).length < 3) {
    const { done, value } = await reader.read();
    if (done) break;
    stderr += new TextDecoder().decode(value);
  }
  server.proc.kill("SIGKILL");
  await server.proc.exited;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    stderr += new TextDecoder().decode(value);
  }
  const [stdout, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  expect({ code, stdout }).toEqual({ code: 2, stdout: "" });
  const message = stderr.split("\n").find((line) => line.startsWith("importd: "))!;
  expect(message).toContain(`importd: cannot reach importd at ${base}: the connection`);
  expect(message).toMatch(/It stopped answering after \d+ jobs of this import had been queued/);
  expect(message).toContain("run the same command: the import resumes where it stopped.");
  expect(message).not.toContain("Is the computer able to access the url");
  expect(stderr).not.toMatch(/^\s+at /m);
  expect(existsSync(`${file}.importd-progress`)).toBe(true);

  // The server comes back (on the same port: the base URL is part of the import's identity).
  server = await spawnServer(dataDir, ["--port", port]);
  const again = Bun.spawn(command, { cwd: projectRoot, env: { ...cleanEnv, IMPORTD_API_KEY: key }, stdout: "pipe", stderr: "pipe" });
  const [resumedOut, resumedErr, resumedCode] = await Promise.all([new Response(again.stdout).text(), new Response(again.stderr).text(), again.exited]);
  expect({ code: resumedCode, stderr: resumedErr.split("\n").filter((line) => !line.includes("records sent")).join("\n") }).toMatchObject({ code: 0 });
  expect(resumedOut).toContain("3000 records, 3000 applied, 0 rejected");
  expect(resumedOut).toMatch(/\d+ of the \d+ jobs had been queued by the interrupted run/);
  // Every chunk is one job: those queued before the server was lost were not queued again.
  const chunks = Number(/in (\d+) jobs/.exec(resumedOut)![1]);
  expect((await jobsIn(base, key)) - referenceJobs).toBe(chunks);
  expect(existsSync(`${file}.importd-progress`)).toBe(false);
}, 180_000);
