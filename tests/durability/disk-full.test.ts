import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { databaseFile } from "../../src/store/sqlite/database";
import { getJob, importBatch, postJson, waitForJob } from "../helpers/api";
import { fillTheDisk, importUntilRefused, jobsMetTheFullDisk } from "../helpers/disk";
import { spawnServer, type ServerProcess } from "../helpers/process";
import { assets, seedReferenceData } from "../helpers/records";
import { tempDir } from "../helpers/server";

// The data directory on a 96 MB tmpfs, filled up while jobs wait. Mounting needs root, which the CI
// machines give; the test says so plainly where they do not.
const mountPoint = tempDir("importd-diskfull-");
const dataDir = join(mountPoint, "data");
const filler = join(mountPoint, "filler");
let server: ServerProcess | undefined;

beforeAll(() => {
  const mount = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", mountPoint], { stderr: "pipe" });
  if (mount.exitCode !== 0) throw new Error(`this test mounts a small tmpfs and needs root: ${mount.stderr}`);
  mkdirSync(dataDir);
});
afterAll(() => {
  server?.proc.kill("SIGKILL");
  Bun.spawnSync(["umount", "-l", mountPoint]);
  rmSync(mountPoint, { recursive: true, force: true });
});


test("a full disk: imports are refused with 507, accepted jobs wait instead of failing, and all of it recovers once space is freed", async () => {
  server = await spawnServer(dataDir, ["--workers", "2"]);
  const key = server.firstRunKey!;
  const base = `${server.url}/default`;
  await seedReferenceData(base, key);

  // A large job (about 20 MB) whose transaction has just started when the disk fills up: the server is
  // paused right after the 202, the disk filled, and the server resumed.
  const large = await importBatch(base, "assets", key, assets(60_000));
  server.proc.kill("SIGSTOP");
  const filled = fillTheDisk(filler);
  server.proc.kill("SIGCONT");

  // SQLite may still write into file space it already holds: keep importing until the disk refuses.
  // Every batch accepted on the way is owed its job, like the two above.
  const waiting: Array<[number, number]> = [[large.id, 60_000]];
  const refused = await importUntilRefused((n) => postJson(base, "assets", key, assets(3000, 70_000 + n * 3000)), filler, waiting, 3000);
  expect([503, 507]).toContain(refused.status);
  expect(refused.headers.get("content-type")).toBe("application/problem+json");
  expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
  const problem = await refused.json();
  expect(problem.detail).toContain("nothing was accepted");

  // While the disk stays full, the accepted jobs wait; none is failed.
  await jobsMetTheFullDisk(server, waiting, async (jobId) => (await getJob(base, key, jobId)).importJobStatus);
  for (const [id] of waiting) expect(["Pending", "Processing", "Succeeded"]).toContain((await getJob(base, key, id)).importJobStatus);
  expect((await fetch(`${server.url}/healthz`)).status).toBe(200);

  // Space comes back: everything finishes by itself, without a restart, and new imports are taken again.
  rmSync(filler);
  for (const [id, count] of waiting) {
    const job = await waitForJob(base, key, id, 60_000);
    expect({ id, status: job.importJobStatus, applied: job.output?.applied }).toEqual({ id, status: "Succeeded", applied: count });
  }
  const again = await importBatch(base, "assets", key, assets(3000, 500_000));
  expect((await waitForJob(base, key, again.id)).importJobStatus).toBe("Succeeded");
  expect(server.proc.exitCode).toBeNull();
  server.proc.kill("SIGKILL");
  await server.proc.exited;
  // A job that meets the full disk while being applied waits and is retried (see the scheduler's tests);
  // here its transaction usually fits in WAL space that its own intake already took, so it rarely does.
  const log = await server.stderr;
  const storageRetries = log.split("\n").filter((line) => line.includes("job attempt failed") && line.includes("disk is full")).length;
  expect(log).not.toContain('"outcome":"Failed"');
  server = undefined;
  console.log(`disk full: filled ${(filled / 1024 / 1024).toFixed(1)} MB; ${refused.status} while full; ${waiting.length} accepted jobs all Succeeded once space was freed (${storageRetries} apply retries on the full disk)`);

  const db = new Database(databaseFile(dataDir), { readonly: true });
  expect(db.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
  const accepted = waiting.reduce((total, [, count]) => total + count, 0);
  expect(db.query("SELECT count(*) AS n FROM assets").get()).toEqual({ n: accepted + 3000 });
  db.close();
}, 180_000);
