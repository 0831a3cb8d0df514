import { afterAll, expect, test } from "bun:test";
import { chownSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { testSql } from "../helpers/sql";
import { PostgresStore } from "../../src/store/postgres/store";
import { outboxRows } from "../../src/webhooks/outbox";
import { getJob, importBatch, postJson, waitForJob } from "../helpers/api";
import { postgresServer, requirePostgres } from "../helpers/postgres";
import { fillTheDisk, importUntilRefused, jobsMetTheFullDisk } from "../helpers/disk";
import { spawnServer, type ServerProcess } from "../helpers/process";
import { assets, seedReferenceData } from "../helpers/records";
import { tempDir } from "../helpers/server";

// PostgreSQL's disk full, as importd meets it: the database's tablespace on a 64 MB tmpfs that fills up
// (PostgreSQL answers 53100, "could not extend file"; its WAL stays on the big disk, where a full disk would
// stop the whole server instead). Mounting needs root, which the CI machines give.

if (requirePostgres("importd on PostgreSQL with a full disk")) {
  const mountPoint = tempDir("importd-pg-diskfull-");
  const tablespaceDir = join(mountPoint, "tablespace");
  const filler = join(mountPoint, "filler");
  const name = `importd_diskfull_${process.pid}`;
  const dataDir = tempDir("importd-pg-diskfull-data-");
  let server: ServerProcess | undefined;

  afterAll(async () => {
    server?.proc.kill("SIGKILL");
    await server?.proc.exited;
    const admin = await postgresServer();
    await admin.admin(async (sql) => {
      await sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await sql.unsafe(`DROP TABLESPACE IF EXISTS "${name}"`);
    });
    Bun.spawnSync(["umount", "-l", mountPoint]);
    rmSync(mountPoint, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });


  test("a full disk under PostgreSQL: imports are refused with 507, accepted jobs wait instead of failing, and all of it recovers once space is freed", async () => {
    const mount = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mountPoint], { stderr: "pipe" });
    if (mount.exitCode !== 0) throw new Error(`this test mounts a small tmpfs and needs root: ${mount.stderr}`);
    mkdirSync(tablespaceDir);
    const id = (flag: string) => Number(Bun.spawnSync(["id", flag, "postgres"]).stdout.toString());
    chownSync(tablespaceDir, id("-u"), id("-g"));
    const pg = await postgresServer();
    await pg.admin(async (sql) => {
      await sql.unsafe(`CREATE TABLESPACE "${name}" LOCATION '${tablespaceDir}'`);
      await sql.unsafe(`CREATE DATABASE "${name}" TABLESPACE "${name}"`);
    });
    const url = pg.url(name);
    await (await PostgresStore.open(url, { outbox: outboxRows })).close();

    server = await spawnServer(dataDir, ["--database-url", url, "--workers", "2"]);
    const key = server.firstRunKey!;
    const base = `${server.url}/default`;
    await seedReferenceData(base, key);

    // A large job accepted just before the disk fills: its run meets the full disk, or finds room in pages
    // PostgreSQL already holds.
    const large = await importBatch(base, "assets", key, assets(20_000));
    const filled = fillTheDisk(filler);

    // PostgreSQL may still write into free space of pages it holds: keep importing until the disk refuses.
    // Every batch accepted on the way is owed its job.
    const waiting: Array<[number, number]> = [[large.id, 20_000]];
    const refused = await importUntilRefused((n) => postJson(base, "assets", key, assets(3000, 70_000 + n * 3000)), filler, waiting, 3000);
    expect(refused.status).toBe(507);
    expect(refused.headers.get("content-type")).toBe("application/problem+json");
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    const problem = await refused.json();
    expect(problem.detail).toContain("nothing was accepted");

    // While the disk stays full, the accepted jobs wait; none is failed, and the server goes on answering.
    await jobsMetTheFullDisk(server, waiting, async (jobId) => (await getJob(base, key, jobId)).importJobStatus);
    for (const [jobId] of waiting) expect(["Pending", "Processing", "Succeeded"]).toContain((await getJob(base, key, jobId)).importJobStatus);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);

    // Space comes back: everything finishes by itself, without a restart, and new imports are taken again.
    rmSync(filler);
    for (const [jobId, count] of waiting) {
      const job = await waitForJob(base, key, jobId, 60_000);
      expect({ jobId, status: job.importJobStatus, applied: job.output?.applied }).toEqual({ jobId, status: "Succeeded", applied: count });
    }
    const again = await importBatch(base, "assets", key, assets(3000, 500_000));
    expect((await waitForJob(base, key, again.id)).importJobStatus).toBe("Succeeded");
    expect(server.proc.exitCode).toBeNull();
    server.proc.kill("SIGTERM");
    expect(await server.proc.exited).toBe(0);
    const log = await server.stderr;
    expect(log).not.toContain('"outcome":"Failed"');
    const storageRetries = log.split("\n").filter((line) => line.includes("job attempt failed") && line.includes("disk is full")).length;
    server = undefined;
    console.log(`PostgreSQL disk full: filled ${(filled / 1024 / 1024).toFixed(1)} MB; 507 while full; ${waiting.length} accepted jobs all Succeeded once space was freed (${storageRetries} apply retries on the full disk)`);

    const sql = testSql(url);
    const [{ n }] = (await sql`SELECT count(*)::int AS n FROM assets`) as unknown as [{ n: number }];
    await sql.end();
    expect(n).toBe(waiting.reduce((total, [, count]) => total + count, 0) + 3000);
  }, 180_000);
}
