import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createClient } from "../../src/client";
import { importd } from "../helpers/process";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";
import { notOverHttps } from "../helpers/backend";

// `importd delete <file of ids>`: the ids read from text, CSV, NDJSON or JSON, sent as delete jobs in chunks, with the
// import's journal, rejected file and exit codes.

let server: TestServer;
let client: ReturnType<typeof createClient>;
const dir = tempDir("importd-delete-");
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
  client = createClient({ baseUrl: server.base, apiKey: server.key });
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const env = () => ({ IMPORTD_API_KEY: server.key });
const remove = (file: string, extra: string[] = [], resource = "assets") => importd(["delete", file, "--resource", resource, "--base-url", server.base, ...extra], env());
const importFile = (file: string, resource = "assets") => importd(["import", file, "--resource", resource, "--base-url", server.base], env());
const write = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const stored = async (id: string) => (await server.query<{ id: string }>("SELECT id FROM assets WHERE id = ?", id)).length > 0;
const seed = async (...indexes: number[]) => expect((await importFile(write(`seed-${indexes[0]}.json`, JSON.stringify(indexes.map((i) => asset(i)))))).code).toBe(0);
const lastJobs = async (n: number) => (await server.query<{ id: number; operation: string; dry_run: number | boolean }>("SELECT id, operation, dry_run FROM jobs ORDER BY id DESC LIMIT ?", n)).reverse();

describe("importd delete", () => {
  test("a text file, one id per line (blank lines skipped, CRLF's CR stripped): deleted and not found, exit 0, one summary", async () => {
    await seed(1, 2);
    const file = write("ids.txt", `${asset(1).id}\r\n\r\n${asset(2).id}\r\n   \r\nNEVER-IMPORTED\r\n`);
    const run = await remove(file);
    expect(run.code).toBe(0);
    const [job] = await lastJobs(1);
    expect(run.stdout).toContain(`${file}: 3 ids, 2 deleted, 1 not found, 0 rejected, in 1 job and`);
    expect(run.stdout).toContain(`(job ${job!.id}).`);
    expect(job!.operation).toBe("delete");
    expect(await stored(asset(1).id)).toBe(false);
    expect(await stored(asset(2).id)).toBe(false);
    expect(existsSync(`${file}.importd-progress`)).toBe(false);
    expect(existsSync(join(dir, "ids.rejected.csv"))).toBe(false);
  }, 60_000);

  notOverHttps("a referred-to record is rejected with its reason, into <file>.rejected.csv; the same command on that file deletes it once the reason is gone", async () => {
    await seed(10);
    const file = write("areas.txt", "north\nnowhere\n");
    const run = await remove(file, [], "subareas");
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(`${file}: 2 ids, 0 deleted, 1 not found, 1 rejected, in 1 job`);
    const rejectedPath = join(dir, "areas.rejected.csv");
    expect(run.stdout).toContain(`are in ${rejectedPath}`);
    expect(run.stdout).toMatch(/\n {2}line 1 'north': \d+ assets? refers? to sub area 'north' \('A-/);
    const rejected = readFileSync(rejectedPath, "utf8").trimEnd().split("\n");
    expect(rejected[0]).toBe("id,_error,_line");
    expect(rejected).toHaveLength(2);
    expect(rejected[1]).toStartWith("north,");
    expect(rejected[1]).toEndWith(",1");

    // Once the assets that name it are gone: the rejected file is a file of ids too.
    const referring = (await server.query<{ id: string }>("SELECT id FROM assets WHERE sub_area_id = 'north'")).map((row) => row.id);
    expect((await remove(write("north-assets.json", JSON.stringify(referring)))).code).toBe(0);
    const again = await remove(rejectedPath, [], "subareas");
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`${rejectedPath}: 1 id, 1 deleted, 0 not found, 0 rejected`);
    // Put back for the other tests.
    await seedReferenceData(server.base, server.key);
  }, 60_000);

  notOverHttps("the CSV file importd import took: its id column is read, the other columns are not", async () => {
    const file = write("assets.csv", `name;id;status\nOne;${asset(20).id};ACT\nTwo;${asset(21).id};ACT\n`);
    await seed(20, 21);
    const run = await remove(file);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("2 ids, 2 deleted, 0 not found, 0 rejected");
    expect(await stored(asset(20).id)).toBe(false);

    const noId = await remove(write("no-id.csv", "name,status\nOne,ACT\n"));
    expect(noId.code).toBe(2);
    expect(noId.stderr).toContain("no-id.csv line 1 has no id column ('name,status'): importd delete reads a CSV file's ids from its column named id.");
  }, 60_000);

  notOverHttps("NDJSON records and a JSON array of ids; --dry-run deletes nothing and says what would be", async () => {
    await seed(30, 31);
    const ndjson = write("records.ndjson", `${JSON.stringify(asset(30))}\n${JSON.stringify({ name: "no id here" })}\n`);
    const dry = await remove(ndjson, ["--dry-run"]);
    expect(dry.code).toBe(1);
    expect(dry.stdout).toContain(`${ndjson}: dry run, nothing was deleted. 2 ids: would delete 1, would not find 0, would reject 1`);
    expect(dry.stdout).toContain("line 2: this line has no id");
    expect(await stored(asset(30).id)).toBe(true);
    expect((await lastJobs(1))[0]).toMatchObject({ operation: "delete" });
    expect(Boolean((await lastJobs(1))[0]!.dry_run)).toBe(true);

    const json = write("ids.json", JSON.stringify([asset(30).id, asset(31).id]));
    const real = await remove(json);
    expect(real.code).toBe(0);
    expect(real.stdout).toContain("2 ids, 2 deleted");
    expect(await stored(asset(31).id)).toBe(false);
  }, 60_000);

  notOverHttps("--dry-run says what would be, in its progress lines and its summary: would delete, would not find, would reject; never that it deleted", async () => {
    await seed(40);
    await client.waitForJob((await client.importRecords("subareas", [{ id: "east-dry", name: "East" }] as never)).id);
    const file = write("dry-areas.txt", "north\nnowhere\neast-dry\n");
    const dry = await remove(file, ["--dry-run"], "subareas");
    expect(dry.code).toBe(1);
    const [job] = await lastJobs(1);
    expect(dry.stderr).toContain(`3 ids read, 3 ids sent, would delete 1, would not find 1, would reject 1; `);
    expect(dry.stderr).toContain(`(job ${job!.id}: PartiallySucceeded)`);
    expect(dry.stdout).toContain(
      `${file}: dry run, nothing was deleted. 3 ids: would delete 1, would not find 1, would reject 1, in 1 job and`,
    );
    expect(dry.stdout).toContain(`(job ${job!.id}). Not found: no such record (never imported, or deleted already); not an error. The ids that would be rejected, each with its reason, are in ${join(dir, "dry-areas.rejected.csv")}.`);
    expect(dry.stdout).toContain("  line 1 'north': ");
    // No count is said as done: not "1 deleted", "1 not found" or "1 rejected".
    expect(`${dry.stdout}\n${dry.stderr}`).not.toMatch(/\d (deleted|not found|rejected)\b/);
    expect((await server.query("SELECT id FROM sub_areas WHERE id = 'east-dry'")).length).toBe(1);
  }, 60_000);

  notOverHttps("ids are sent in chunks, in order, each with an Idempotency-Key of its own (--chunk-bytes)", async () => {
    const indexes = Array.from({ length: 120 }, (_, i) => 100 + i);
    await seed(...indexes);
    const file = write("many.txt", indexes.map((i) => asset(i).id).join("\n"));
    const run = await remove(file, ["--chunk-bytes", "1024"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("120 ids, 120 deleted, 0 not found, 0 rejected, in 2 jobs");
    const keys = await server.query<{ key: string }>("SELECT key FROM idempotency_keys WHERE key LIKE 'importd-delete-%'");
    expect(keys.length).toBeGreaterThanOrEqual(2);
  }, 60_000);

  test("an interrupted delete resumes from its progress file: the chunks that went through are not sent again", async () => {
    await seed(300, 301);
    const file = write("resume.txt", `${asset(300).id}\n${asset(301).id}\n`);
    // The interrupted run queued its only chunk as job N, then stopped before writing anything else.
    const earlier = await client.deleteRecords("assets", [asset(300).id, asset(301).id]);
    await client.waitForJob(earlier.id);
    const { size, mtimeMs } = statSync(file);
    const header = { resource: "assets", baseUrl: server.base.replace(/\/+$/, ""), fileBytes: size, fileModifiedMs: mtimeMs, operation: "delete", runId: "0123456789abcdef", startedAt: "2026-11-27T10:00:00.000Z", chunkBytes: 7_500_000 };
    writeFileSync(`${file}.importd-progress`, `${JSON.stringify(header)}\n${JSON.stringify({ chunk: 0, jobId: earlier.id, dropped: [] })}\n`);
    const jobsBefore = (await lastJobs(1))[0]!.id;
    const run = await remove(file);
    expect(run.code).toBe(0);
    expect(run.stderr).toContain(`Resuming the delete of ${file} started 2026-11-27T10:00:00.000Z`);
    expect(run.stdout).toContain(`2 ids, 2 deleted, 0 not found, 0 rejected, in 1 job`);
    expect(run.stdout).toContain("had been queued by the interrupted run");
    expect((await lastJobs(1))[0]!.id).toBe(jobsBefore);
    expect(existsSync(`${file}.importd-progress`)).toBe(false);

    // An import's progress file is not taken for a delete's: the delete starts anew, and says why.
    writeFileSync(`${file}.importd-progress`, `${JSON.stringify({ ...header, operation: undefined })}\n${JSON.stringify({ chunk: 0, jobId: earlier.id, dropped: [] })}\n`);
    const fresh = await remove(file);
    expect(fresh.code).toBe(0);
    expect(fresh.stderr).toContain("An interrupted import of this file (started 2026-11-27T10:00:00.000Z) is not resumed, because this is a delete: starting a new delete.");
    expect(fresh.stdout).toContain("2 ids, 0 deleted, 2 not found");
  }, 60_000);

  notOverHttps("a delete job that fails as a whole (given up after its attempts): every id it took is rejected, for its reason, exit 1", async () => {
    // Every job of this server is given up at its first claim, as the fourth claim of one that kept crashing is.
    const failing = await startTestServer({ testHooks: { maxAttempts: 0 } });
    try {
      const file = write("given-up.txt", "A-1\nA-2\n");
      const run = await importd(["delete", file, "--resource", "assets", "--base-url", failing.base], { IMPORTD_API_KEY: failing.key });
      expect(run.code).toBe(1);
      expect(run.stdout).toContain(`${file}: 2 ids, 0 deleted, 0 not found, 2 rejected, in 1 job`);
      expect(run.stdout).toContain("  line 1 'A-1': Nothing was applied: the job could not be processed after");
      const rejected = readFileSync(join(dir, "given-up.rejected.csv"), "utf8").trimEnd().split("\n");
      expect(rejected.map((line) => line.split(",")[0])).toEqual(["id", "A-1", "A-2"]);
      const [job] = await failing.query<{ output: string }>("SELECT output FROM jobs ORDER BY id DESC LIMIT 1");
      const output = typeof job!.output === "string" ? JSON.parse(job!.output) : job!.output;
      expect(output).toMatchObject({ deleted: 0, notFound: 0, rejected: 2 });
      expect(output).not.toHaveProperty("created");
    } finally {
      await failing.close();
    }
  }, 60_000);

  notOverHttps("usage and file problems exit 2 with one line", async () => {
    const noResource = await importd(["delete", write("x.txt", "a\n"), "--base-url", server.base], env());
    expect(noResource.code).toBe(2);
    expect(noResource.stderr).toContain("--resource must be one of");
    const unknown = await remove(write("ids.xlsx", "a\n"));
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("--format");
    const help = await importd(["delete", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("one id per line");
    expect(help.stdout).toContain("Exit code: 0 every id deleted or not found, 1 some rejected");
  }, 60_000);
});
