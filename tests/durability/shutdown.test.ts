import { afterAll, expect, test } from "bun:test";
import { existsSync, rmSync, statSync } from "node:fs";
import { databaseFile } from "../../src/store/sqlite/database";
import { getJob, postJson, waitForJob, type JobDocument } from "../helpers/api";
import { queryStore, spawnServer, type ServerProcess } from "../helpers/process";
import { assetsBody, seedReferenceData } from "../helpers/records";
import { tempDir, testBackend } from "../helpers/server";

const dirs: string[] = [];
const servers: ServerProcess[] = [];
afterAll(() => {
  for (const server of servers) server.proc.kill("SIGKILL");
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function start(dataDir: string, args: string[] = []): Promise<ServerProcess> {
  const server = await spawnServer(dataDir, ["--workers", "2", ...args]);
  servers.push(server);
  return server;
}

/** A fresh server with reference data, and a large asset job that is being applied right now. */
async function serverInTheMiddleOfALargeJob(args: string[] = []) {
  const dataDir = tempDir("importd-shutdown-");
  dirs.push(dataDir);
  const server = await start(dataDir, args);
  const key = server.firstRunKey!;
  const base = `${server.url}/default`;
  await seedReferenceData(base, key);
  // 15 MB: seconds of applying on 2 cores, however busy; the signal comes within milliseconds of Processing.
  const { body, count } = assetsBody(15 * 1024 * 1024);
  const response = await postJson(base, "assets", key, body);
  expect(response.status).toBe(202);
  const { id } = (await response.json()) as JobDocument;
  for (let job = await getJob(base, key, id); job.importJobStatus !== "Processing"; job = await getJob(base, key, id)) {
    if (job.importJobStatus !== "Pending") throw new Error(`the job finished before the signal could be sent (${job.importJobStatus}); make the batch larger`);
    await Bun.sleep(2);
  }
  return { dataDir, server, key, id, count };
}

async function inspect(dataDir: string, jobId: number) {
  const [{ n: assets }] = (await queryStore<{ n: number }>(dataDir, "SELECT count(*) AS n FROM assets")) as [{ n: number }];
  const [{ status: jobStatus }] = (await queryStore<{ status: string }>(dataDir, "SELECT status FROM jobs WHERE id = ?", jobId)) as [{ status: string }];
  return { assets, jobStatus };
}

// SQLite's file is checked whole; PostgreSQL's files are its own business.
async function expectIntact(dataDir: string) {
  if (testBackend === "sqlite") expect(await queryStore(dataDir, "PRAGMA integrity_check")).toEqual([{ integrity_check: "ok" }]);
}

// On PostgreSQL there is no WAL file of importd's: nothing to leave behind.
const walBytes = (dataDir: string) => (existsSync(`${databaseFile(dataDir)}-wal`) ? statSync(`${databaseFile(dataDir)}-wal`).size : 0);

async function afterRestart(dataDir: string, key: string, id: number) {
  const server = await start(dataDir);
  const job = await waitForJob(`${server.url}/default`, key, id, 120_000);
  server.proc.kill("SIGKILL");
  await server.proc.exited;
  return job;
}

test("SIGTERM during a large job: the job's transaction finishes, the WAL is checkpointed, exit 0; nothing lost or doubled after restart", async () => {
  const { dataDir, server, key, id, count } = await serverInTheMiddleOfALargeJob();
  const signalledAt = performance.now();
  server.proc.kill("SIGTERM");
  // While the job is still committing, new connections are refused.
  await Bun.sleep(100);
  const stillRunning = server.proc.exitCode === null;
  expect(await fetch(`${server.url}/healthz`).then(() => "answered", () => "refused")).toBe("refused");
  expect(await server.proc.exited).toBe(0);
  console.log(`SIGTERM mid-job: stopped in ${(performance.now() - signalledAt).toFixed(0)} ms (refusing connections meanwhile: ${stillRunning})`);
  const log = await server.stderr;
  expect(log).toContain('"msg":"stopped cleanly"');
  // Whoever stopped it is told what it waits for, for how long, and how not to wait.
  expect(log).toMatch(new RegExp(`"msg":"waiting for job ${id} to finish, up to (30|29) s; send the signal again \\(Ctrl-C\\) to stop now: it runs again at the next start"`));

  // Before any restart: the job committed as a whole, and the database file alone holds it.
  expect(walBytes(dataDir)).toBe(0);
  const stopped = await inspect(dataDir, id);
  expect(stopped.jobStatus).toBe("Succeeded");
  expect(stopped.assets).toBe(count);

  const job = await afterRestart(dataDir, key, id);
  expect(job.importJobStatus).toBe("Succeeded");
  expect(job.output).toMatchObject({ total: count, applied: count, rejected: 0 });
  expect((await inspect(dataDir, id)).assets).toBe(count);
  await expectIntact(dataDir);
}, 180_000);

test("past --shutdown-timeout the running job is rolled back, not half-applied, and runs again at the next start", async () => {
  const { dataDir, server, key, id, count } = await serverInTheMiddleOfALargeJob(["--shutdown-timeout", "0"]);
  server.proc.kill("SIGTERM");
  expect(await server.proc.exited).toBe(0);
  expect(await server.stderr).toContain("stopped at the shutdown deadline");

  await expectIntact(dataDir);
  const stopped = await inspect(dataDir, id);
  expect(stopped.jobStatus).toBe("Processing");
  expect(stopped.assets).toBe(0);

  const job = await afterRestart(dataDir, key, id);
  expect(job.importJobStatus).toBe("Succeeded");
  expect(job.output).toMatchObject({ total: count, applied: count, rejected: 0 });
  expect((await inspect(dataDir, id)).assets).toBe(count);
  await expectIntact(dataDir);
}, 180_000);

test("a second signal exits at once; the job still completes after restart", async () => {
  const { dataDir, server, key, id, count } = await serverInTheMiddleOfALargeJob();
  server.proc.kill("SIGINT");
  await Bun.sleep(20);
  const secondAt = performance.now();
  server.proc.kill("SIGINT");
  expect(await server.proc.exited).not.toBe(0);
  expect(performance.now() - secondAt).toBeLessThan(1_000);

  const job = await afterRestart(dataDir, key, id);
  expect(job.importJobStatus).toBe("Succeeded");
  expect((await inspect(dataDir, id)).assets).toBe(count);
  await expectIntact(dataDir);
}, 180_000);

test("SIGINT on an idle server exits 0 at once and leaves no WAL behind", async () => {
  const dataDir = tempDir("importd-shutdown-");
  dirs.push(dataDir);
  const server = await start(dataDir);
  await seedReferenceData(`${server.url}/default`, server.firstRunKey!);
  const signalledAt = performance.now();
  server.proc.kill("SIGINT");
  expect(await server.proc.exited).toBe(0);
  expect(performance.now() - signalledAt).toBeLessThan(5_000);
  expect(walBytes(dataDir)).toBe(0);
}, 60_000);
