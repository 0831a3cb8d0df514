import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createClient, type Sync } from "../../src/client";
import { importd, projectRoot, importdCommand } from "../helpers/process";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";
import { until } from "../helpers/until";
import { notOverHttps } from "../helpers/backend";

// `importd import --mirror`: the file sent in a sync, which is then completed, deleting the records the file does not
// have; its dry run, its guard, and a resumed mirror that keeps its sync. Each test has a server of its own: a mirror
// deletes whatever else the resource holds.

let server: TestServer | undefined;
const dir = tempDir("importd-mirror-");
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function fresh() {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
  return { server, client: createClient({ baseUrl: server.base, apiKey: server.key }) };
}

const header = "id,subAreaId,name,status,assetCategoryId,assetTypeId,shapeType,startPoint,endPoint,geolocation.linearReferenceStart,geolocation.linearReferenceEnd,geolocation.locationStart,geolocation.locationEnd,geolocation.locationUnit";
const row = (i: number) => {
  const a = asset(i);
  const g = a.geolocation;
  return [a.id, a.subAreaId, a.name, a.status, a.assetCategoryId, a.assetTypeId, a.shapeType, a.startPoint, a.endPoint, g.linearReferenceStart, g.linearReferenceEnd, g.locationStart, g.locationEnd, g.locationUnit].join(",");
};
const csv = (name: string, indexes: number[]) => {
  const path = join(dir, name);
  writeFileSync(path, [header, ...indexes.map(row)].join("\n"));
  return path;
};
const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);
const run = (file: string, extra: string[] = []) => importd(["import", file, "--resource", "assets", "--base-url", server!.base, ...extra], { IMPORTD_API_KEY: server!.key });
const storedIds = async () => (await server!.query<{ id: string }>("SELECT id FROM assets ORDER BY id")).map((r) => r.id);
const jobCount = async () => Number((await server!.query<{ n: number }>("SELECT count(*) AS n FROM jobs"))[0]!.n);
/** Twenty assets, imported plainly: what the mirrors below start from. */
const seedTwenty = async () => expect((await run(csv(`seed-${Math.random()}.csv`, range(0, 20)))).code).toBe(0);

describe("importd import --mirror", () => {
  test("a mirror of a CSV that drops rows deletes exactly those, in a sync that ends completed, and says so", async () => {
    const { client } = await fresh();
    await seedTwenty();
    const file = csv("dropped.csv", range(0, 20).filter((i) => i !== 3 && i !== 7));
    const mirrored = await run(file, ["--mirror"]);
    expect(mirrored.stderr).not.toContain("importd:");
    expect(mirrored.code).toBe(0);
    expect(mirrored.stdout).toContain("18 records, 18 applied, 0 rejected");
    const said = /Mirror \(sync (\d+), job (\d+)\): (.*)/.exec(mirrored.stdout)!;
    expect(said[3]).toContain("Deleted 2");
    expect(await storedIds()).toEqual(range(0, 20).filter((i) => i !== 3 && i !== 7).map((i) => asset(i).id));
    const sync = await client.getSync(Number(said[1]));
    expect(sync).toMatchObject({ state: "completed", completedByJobId: Number(said[2]), recordsSent: 18 });
    expect(existsSync(`${file}.importd-progress`)).toBe(false);
    // Mirroring the same file again deletes nothing more.
    const again = await run(file, ["--mirror"]);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/Mirror \(sync \d+, job \d+\): .*Deleted 0/);
    expect(await storedIds()).toHaveLength(18);
  }, 120_000);

  test("--dry-run deletes nothing and prints exactly what it would delete, counted by the server from the file's dry runs; over the limit it says which flag lets it through", async () => {
    const { client } = await fresh();
    await seedTwenty();
    const jobs = await jobCount();
    const file = csv("dry.csv", range(5, 15));
    const dry = await run(file, ["--mirror", "--dry-run"]);
    expect(dry.stdout).toContain("Mirror, dry run stopped (sync 1, job ");
    expect(dry.stdout).toContain("Dry run: nothing was applied. Applying it would fail: the mirror would delete 5 of 20 asset records (25%)");
    expect(dry.stdout).toContain("If that is right, run the same command without --dry-run and with --max-delete-percent 25 (or --max-delete 5).");
    expect(dry.code).toBe(1);
    expect(await storedIds()).toHaveLength(20);
    // Its chunks and its completion were dry runs; its sync stays open, used for nothing else.
    expect((await client.listJobs({ dryRun: false, limit: 1000 })).items).toHaveLength(jobs);
    expect(await client.getSync(1)).toMatchObject({ state: "open", recordsSent: 0 });
    expect(existsSync(`${file}.importd-progress`)).toBe(false);

    const allowed = await run(file, ["--mirror", "--dry-run", "--max-delete-percent", "25"]);
    expect(allowed.code).toBe(0);
    expect(allowed.stdout).toContain("Mirror, dry run (sync 2, job ");
    expect(allowed.stdout).toContain("Dry run: nothing was applied. Would delete 5 of 5 asset records. Considered: the 5 asset records of 20 that no job of sync 2 sent");
    expect(allowed.stdout).toContain("(15 kept). The same command without --dry-run would delete them.\n");
    expect(await storedIds()).toHaveLength(20);
  }, 120_000);

  notOverHttps("the percent guard deletes nothing and exits 1 in the server's words; the same command with --max-delete-percent completes the same sync without sending the file again", async () => {
    const { client } = await fresh();
    await seedTwenty();
    const file = csv("truncated.csv", range(0, 15));
    const stopped = await run(file, ["--mirror"]);
    expect(stopped.code).toBe(1);
    expect(stopped.stdout).toContain("Nothing was deleted: the mirror would delete 5 of 20 asset records (25%), more than the 10% allowed. If that is right, complete the sync again with ?maxDeletePercent=25 (or ?maxDelete=5).");
    expect(stopped.stdout).toContain("If that is right, run the same command with --max-delete-percent 25 (or --max-delete 5): the file is not sent again");
    expect(await storedIds()).toHaveLength(20);
    const syncId = Number(/Mirror stopped \(sync (\d+)/.exec(stopped.stdout)![1]);
    expect(existsSync(`${file}.importd-progress`)).toBe(true);

    const jobs = await jobCount();
    const through = await run(file, ["--mirror", "--max-delete-percent", "25"]);
    expect(through.code).toBe(0);
    expect(through.stdout).toContain(`Mirror (sync ${syncId}, job `);
    expect(await storedIds()).toEqual(range(0, 15).map((i) => asset(i).id));
    // One more job: the completion. The file's chunk was the first run's.
    expect((await jobCount()) - jobs).toBe(1);
    const sync = await client.getSync(syncId);
    expect(sync.state).toBe("completed");
    expect(sync.jobs.map((job) => [job.operation, job.importJobStatus])).toEqual([
      ["upsert", "Succeeded"],
      ["syncCompletion", "Failed"],
      ["syncCompletion", "Succeeded"],
    ]);
    expect(existsSync(`${file}.importd-progress`)).toBe(false);
  }, 120_000);

  test("a mirror interrupted with Ctrl-C resumes in the same sync: both runs' jobs are in it, and its completion deletes what the file does not have", async () => {
    const { client } = await fresh();
    // Ten assets the file does not have, among 2,010: under the 10% limit.
    expect((await run(csv("others.csv", range(9000, 10)))).code).toBe(0);
    const file = join(dir, "resume.ndjson");
    writeFileSync(file, range(5000, 2000).map((i) => JSON.stringify(asset(i))).join("\n"));
    const before = await jobCount();
    const command = [...importdCommand, "import", file, "--resource", "assets", "--base-url", server!.base, "--chunk-bytes", "40000", "--mirror"];
    const proc = Bun.spawn(command, { cwd: projectRoot, env: { ...process.env, IMPORTD_API_KEY: server!.key }, stdout: "pipe", stderr: "pipe" });
    await until(async () => (await jobCount()) - before >= 3, { what: "3 of the mirror's requests accepted", deadlineMs: 30_000, everyMs: 10 });
    proc.kill("SIGINT");
    expect(await proc.exited).toBe(130);
    const interrupted = (await jobCount()) - before;
    const syncId = (JSON.parse(readFileSync(`${file}.importd-progress`, "utf8").split("\n")[0]!) as { sync: number }).sync;
    expect(syncId).toBeGreaterThan(0);

    const resumed = await run(file, ["--chunk-bytes", "40000", "--mirror"]);
    expect(resumed.code).toBe(0);
    expect(resumed.stderr).toContain(`The interrupted mirror's sync ${syncId} (opened`);
    expect(resumed.stdout).toContain("2000 records, 2000 applied, 0 rejected");
    expect(resumed.stdout).toContain(`Mirror (sync ${syncId}, job `);
    const chunks = Number(/in (\d+) jobs/.exec(resumed.stdout)![1]);
    expect(interrupted).toBeLessThan(chunks);
    const sync: Sync = await client.getSync(syncId);
    expect(sync).toMatchObject({ state: "completed", recordsSent: 2000 });
    // Every chunk's job, the interrupted run's and the resumed run's, is in the one sync, and then its completion.
    expect(sync.jobs.filter((job) => job.operation === "upsert")).toHaveLength(chunks);
    expect(sync.jobs.at(-1)).toMatchObject({ operation: "syncCompletion", importJobStatus: "Succeeded" });
    expect((await jobCount()) - before).toBe(chunks + 1);
    expect(await storedIds()).toEqual(range(5000, 2000).map((i) => asset(i).id));
    expect(existsSync(`${file}.importd-progress`)).toBe(false);
  }, 180_000);

  notOverHttps("a resumed mirror whose sync ended meanwhile says so and what to do, and the same command then mirrors anew", async () => {
    const { client } = await fresh();
    await seedTwenty();
    const file = csv("ended.csv", range(0, 19));
    // The progress file of an interrupted mirror whose sync has since been completed by someone else.
    const sync = await client.openSync("assets");
    await client.waitForJob((await client.completeSync(sync.id, { maxDeletePercent: 100 })).id);
    const stats = Bun.file(file);
    const identity = { resource: "assets", baseUrl: server!.base, fileBytes: stats.size, fileModifiedMs: (await stats.stat()).mtimeMs, mirror: true };
    writeFileSync(`${file}.importd-progress`, `${JSON.stringify({ ...identity, runId: "r-ended", startedAt: "2026-11-27T10:00:00.000Z", chunkBytes: 7_500_000, sync: sync.id })}\n`);
    const refused = await run(file, ["--mirror"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`The interrupted mirror of this file cannot be resumed: its sync ${sync.id} was completed meanwhile, by job`);
    expect(refused.stderr).toContain("running the same command again mirrors the file anew, in a new sync.");
    expect(existsSync(`${file}.importd-progress`)).toBe(false);
    const again = await run(file, ["--mirror"]);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/Mirror \(sync \d+, job \d+\): .*Deleted 0/);
  }, 120_000);

  notOverHttps("a record refused before any job took it stops the mirror before it deletes: importd would not know the file has it", async () => {
    const { client } = await fresh();
    await seedTwenty();
    const file = csv("invalid.csv", range(0, 20));
    // Row 5 (A-0000004) gets a shape importd refuses: the request drops it, and the sync never hears of it.
    writeFileSync(file, readFileSync(file, "utf8").replace(/^(A-0000004,.*?),LineString,/m, "$1,Hexagon,"));
    const stopped = await run(file, ["--mirror"]);
    expect(stopped.code).toBe(1);
    expect(stopped.stdout).toContain("20 records, 19 applied, 1 rejected");
    expect(stopped.stdout).toMatch(/The mirror is not completed, so nothing is deleted: 1 record of the file was refused before any job took it \(in \S+invalid\.rejected\.csv\), so importd does not know it is in the file and completing sync (\d+) would delete it\./);
    const syncId = Number(/completing sync (\d+) would/.exec(stopped.stdout)![1]);
    expect(await storedIds()).toHaveLength(20);
    expect((await client.getSync(syncId)).state).toBe("open");
    expect(existsSync(`${file}.importd-progress`)).toBe(false);
  }, 120_000);

  notOverHttps("a sync that expires while the file is sent: nothing deleted, and the same command is what to run again", async () => {
    // Syncs that expire as soon as they open: the mirror's first request finds its sync ended (409).
    server = await startTestServer({ testHooks: { syncLifetimeMs: 1 } });
    await seedReferenceData(server.base, server.key);
    await seedTwenty();
    const file = csv("expiring.csv", range(0, 19));
    const ended = await run(file, ["--mirror"]);
    expect(ended.code).toBe(2);
    expect(ended.stderr).toMatch(/importd: the mirror's sync \d+ ended while the file was being sent \(.*expired.*\)\. Nothing was deleted\. Run the same command again: it opens a new sync and sends the whole file in it\./);
    expect(await storedIds()).toHaveLength(20);
    expect(existsSync(`${file}.importd-progress`)).toBe(false);
  }, 120_000);

  notOverHttps("usage: the limits go with --mirror, one at a time, in range; --mirror does not go with --validate-only", async () => {
    const file = csv("usage.csv", [1]);
    const base = ["import", file, "--resource", "assets", "--base-url", "http://127.0.0.1:9/default"];
    const env = { IMPORTD_API_KEY: "k" };
    expect((await importd([...base, "--max-delete-percent", "5"], env)).stderr).toContain("--max-delete-percent and --max-delete go with --mirror");
    expect((await importd([...base, "--mirror", "--max-delete-percent", "5", "--max-delete", "3"], env)).stderr).toContain("not both");
    expect((await importd([...base, "--mirror", "--max-delete-percent", "101"], env)).stderr).toContain("--max-delete-percent must be a whole number from 0 to 100, not '101'");
    expect((await importd([...base, "--mirror", "--max-delete", "-1"], env)).code).toBe(2);
    expect((await importd([...base, "--mirror", "--validate-only"], env)).stderr).toContain("--mirror and --validate-only do not go together");
  }, 60_000);
});
