import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { createClient } from "../../src/client";
import { testTls } from "../helpers/backend";
import { requireChromium } from "../helpers/browser";
import { consoleContext, screenshot, sharedTab, signIn } from "../helpers/console";
import { heldRequests, type HeldRequests } from "../helpers/held-requests";
import { until } from "../helpers/until";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";

// The console's mirror (DECISIONS 13): the import screen's "Mirror" box; its dry run says exactly what applying would
// delete before anything is applied (the file's dry runs in a sync of their own, counted by a dry-run completion, as
// importd import --mirror --dry-run does); applying sends the file in a sync and completes it, deleting at most what the
// dry run showed.

const header = "id,subAreaId,name,status,assetCategoryId,assetTypeId,shapeType";
const row = (i: number) => `${asset(i).id},north,Main ${i},ACT,water,pipe,Point`;

if (requireChromium("the console's mirror in headless Chromium")) {
  const dir = tempDir("importd-console-mirror-");
  let server: TestServer;
  let context: BrowserContext;
  let tab: () => Promise<Page>;
  let proxy: HeldRequests;

  beforeAll(async () => {
    // At most 1 MB a request, as a proxy's limit would: the reloaded mirror's file is several requests.
    server = await startTestServer({ maxBodyBytes: 1_000_000 });
    proxy = heldRequests(server.url);
    await seedReferenceData(server.base, server.key);
    context = await consoleContext();
    tab = sharedTab(context);
  }, 60_000);
  afterAll(async () => {
    proxy?.close();
    await context?.close();
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const client = () => createClient({ baseUrl: server.base, apiKey: server.key, ca: testTls ? readFileSync(testTls.cert, "utf8") : undefined });
  const storedIds = async () => (await server.query<{ id: string }>("SELECT id FROM assets ORDER BY id")).map((r) => r.id);

  test("the dry run of a mirror says it would delete 5 of 20, and that importd's limit stops that many, before anything is applied; applying deletes exactly those, in one sync", async () => {
    await client().waitForJob((await client().importRecords("assets", Array.from({ length: 20 }, (_, i) => asset(i)) as never)).id);
    const file = join(dir, "assets-today.csv");
    writeFileSync(file, [header, ...Array.from({ length: 15 }, (_, i) => row(i + 5))].join("\n") + "\n");

    const page = await tab();
    await signIn(page, server.url, server.key);
    await page.getByRole("link", { name: "Import" }).click();
    await page.getByRole("heading", { name: "Import a file" }).waitFor();
    await page.getByLabel("Resource").selectOption("assets");
    await page.getByLabel("Mirror: delete the records of assets that the file does not have").check();
    await page.getByLabel("File", { exact: true }).setInputFiles(file);
    await page.getByRole("button", { name: "Check with a dry run" }).click();
    const forecast = page.getByRole("region", { name: "Mirror forecast" });
    await forecast.waitFor({ timeout: 60_000 });
    expect(await forecast.locator(".verdict").textContent()).toBe("Mirror: would delete 5 records of assets, those importd has that the file does not.");
    const told = (await forecast.locator(".quiet").textContent())!;
    expect(told).toMatch(/^importd's dry run of the mirror's end \(job \d+\): Would delete 5 of 5 asset records\. Considered: the 5 asset records of 20 that no job of sync 1 sent and no other job wrote since it opened \(15 kept\)\.$/);
    expect(await forecast.textContent()).toContain("importd's limit: the mirror would delete 5 of 20 asset records (25%), more than the 10% allowed. Applying lets them through.");
    await screenshot(page, "import-mirror-dry-run");
    // The server said so: the file went as dry runs in sync 1, whose dry-run completions (the first stopped by the
    // limit, the second allowing the 5) said what the page shows. Nothing applied, nothing deleted, the sync open.
    expect(await storedIds()).toHaveLength(20);
    const tried = await client().getSync(1);
    expect(tried).toMatchObject({ state: "open", recordsSent: 0 });
    expect(tried.jobs.map((job) => [job.operation, job.dryRun, job.importJobStatus])).toEqual([
      ["upsert", true, "Succeeded"],
      ["syncCompletion", true, "Failed"],
      ["syncCompletion", true, "Succeeded"],
    ]);
    const counted = tried.lastCompletion!;
    expect(told).toStartWith(`importd's dry run of the mirror's end (job ${counted.id}): `);
    expect(counted.output).toMatchObject({ deleted: 5, total: 5, rejected: 0 });
    expect(counted.output!.message).toContain(told.slice(told.indexOf("): ") + 3));

    await page.getByRole("button", { name: "Apply: import the file and delete 5 records" }).click();
    const outcome = page.getByRole("region", { name: "Mirror outcome" });
    await outcome.waitFor({ timeout: 60_000 });
    expect(await outcome.textContent()).toMatch(/^Mirror \(sync 2, job \d+ Succeeded\): Deleted 5 of 5 asset records\./);
    expect(await storedIds()).toEqual(Array.from({ length: 15 }, (_, i) => asset(i + 5).id));
    const sync = await client().getSync(2);
    expect(sync).toMatchObject({ state: "completed", recordsSent: 15 });
    expect(sync.jobs.map((job) => job.operation)).toEqual(["upsert", "syncCompletion"]);
    // At most what the dry run showed: the completion was queued with maxDelete=5.
    expect(sync.lastCompletion?.output?.deleted).toBe(5);
    await screenshot(page, "import-mirror-done");

    // The completion's own page says what it is, and counts what it deleted of what it considered.
    const completion = sync.jobs.find((job) => job.operation === "syncCompletion")!;
    await page.goto(`${server.url}/console/#/jobs/${completion.id}`);
    await page.getByRole("heading", { name: `Job ${completion.id}` }).waitFor();
    expect(await page.locator(".facts").textContent()).toContain("OperationsyncCompletion: a mirror's completion, which deletes the records its sync's imports did not send");
    expect(await page.getByLabel("Counts").textContent()).toBe("Deleted5Considered5Rejected0");
  }, 120_000);

  test("a mirror reloaded in the middle of applying resumes in the same sync: the jobs before and after the reload are in it", async () => {
    // About 3 MB of JSON: sent in requests under 1 MB, once the first, too big, was refused.
    const rows = 10_000;
    const file = join(dir, "mirror-resumed.csv");
    // Assets the file does not have (and, after the first test, its 15).
    await client().waitForJob((await client().importRecords("assets", Array.from({ length: 10 }, (_, i) => asset(90_000 + i)) as never)).id);
    const long = (i: number) => `${asset(i).id},north,"Water main ${i}, between the mill and the station and a little further on",ACT,water,pipe,LineString`;
    writeFileSync(file, [header, ...Array.from({ length: rows }, (_, i) => long(10_000 + i))].join("\n") + "\n");
    const page = await tab();
    await signIn(page, proxy.url, server.key);
    await page.getByRole("link", { name: "Import" }).click();
    await page.getByLabel("Resource").selectOption("assets");
    await page.getByLabel("Mirror: delete the records of assets that the file does not have").check();
    await page.getByLabel("File", { exact: true }).setInputFiles(file);
    await page.getByRole("button", { name: "Check with a dry run" }).click();
    const apply = page.getByRole("button", { name: /^Apply: import the file and delete \d+ records?$/ });
    await apply.waitFor({ timeout: 60_000 });
    const wouldDelete = (await server.query<{ n: number }>("SELECT count(*) AS n FROM assets"))[0]!.n;
    expect(await apply.textContent()).toBe(`Apply: import the file and delete ${wouldDelete} record${wouldDelete === 1 ? "" : "s"}`);

    // The import's requests that the server takes (the first, too big, is refused: 413): the second is held.
    proxy.holdAfter(1, (request) => request.method === "POST" && new URL(request.url).pathname.endsWith("/v2/assets") && Number(request.headers.get("content-length")) <= 1_000_000);
    await apply.click();
    type Saved = { mirror: boolean; run: { sync?: number; maxDelete?: number; entries: Array<{ jobId: number | null }> } };
    const saved = () => page.evaluate(() => JSON.parse(sessionStorage.getItem("importd.import") ?? "null") as Saved | null);
    await until(saved, { holds: (kept) => (kept?.run.entries.length ?? 0) > 0, deadlineMs: 30_000, what: "a request of the mirror queued" });
    await until(async () => proxy.held(), { holds: (n) => n === 1, deadlineMs: 30_000, what: "the next request held" });
    await page.reload();
    proxy.release();
    const before = (await saved())!;
    const syncId = before.run.sync!;
    expect(syncId).toBeGreaterThan(0);
    expect(before).toMatchObject({ mirror: true, run: { maxDelete: wouldDelete } });

    const note = page.getByRole("status", { name: "Interrupted import" });
    expect(await note.textContent()).toContain("The mirror of mirror-resumed.csv (");
    await page.getByLabel("Resource").selectOption("assets");
    await page.getByLabel("File", { exact: true }).setInputFiles(file);
    // Not a resume until the box is ticked again: a mirror's end deletes records.
    expect(await page.getByRole("button", { name: "Resume the import" }).count()).toBe(0);
    await page.getByLabel("Mirror: delete the records of assets that the file does not have").check();
    await page.getByRole("button", { name: "Resume the import" }).click();
    const outcome = page.getByRole("region", { name: "Mirror outcome" });
    await outcome.waitFor({ timeout: 120_000 });
    expect(await outcome.textContent()).toMatch(new RegExp(`^Mirror \\(sync ${syncId}, job \\d+ Succeeded\\): Deleted ${wouldDelete} of ${wouldDelete} asset records`));
    const jobs = (await page.getByRole("region", { name: "Import result" }).getByRole("link", { name: /^Job \d+$/ }).allTextContents()).map((text) => Number(text.slice(4)));
    expect(jobs.length).toBeGreaterThan(1);
    const sync = await client().getSync(syncId);
    expect(sync).toMatchObject({ state: "completed", recordsSent: rows });
    expect(sync.jobs.filter((job) => job.operation === "upsert").map((job) => job.id)).toEqual(jobs);
    expect(await storedIds()).toHaveLength(rows);
  }, 180_000);

  test("the dry run counts exactly: a sub area an asset refers to is kept, not counted as deleted as paging the records would; the page says what the server's completion says", async () => {
    // Five sub areas; the file has two, and an asset refers to one of the three it lacks. The ids the file lacks (an
    // upper bound) are 3; the mirror would delete 2.
    await client().waitForJob((await client().importRecords("subareas", [{ id: "east", name: "East" }, { id: "west", name: "West" }, { id: "centre", name: "Centre" }] as never)).id);
    await client().waitForJob((await client().importRecords("assets", [asset(95_000, { subAreaId: "east" })] as never)).id);
    const file = join(dir, "subareas-today.csv");
    writeFileSync(file, "id,name\nnorth,North district\nsouth,South district\n");

    const page = await tab();
    await signIn(page, server.url, server.key);
    await page.getByRole("link", { name: "Import" }).click();
    await page.getByLabel("Resource").selectOption("subareas");
    await page.getByLabel("Mirror: delete the records of subareas that the file does not have").check();
    await page.getByLabel("File", { exact: true }).setInputFiles(file);
    await page.getByRole("button", { name: "Check with a dry run" }).click();
    const forecast = page.getByRole("region", { name: "Mirror forecast" });
    await forecast.waitFor({ timeout: 60_000 });
    expect(await forecast.locator(".verdict").textContent()).toBe("Mirror: would delete 2 records of subareas, those importd has that the file does not; 1 more is kept, as other records refer to it.");
    expect(await forecast.textContent()).toContain("importd's limit: the mirror would delete 3 of 5 sub area records (60%), more than the 10% allowed. Applying lets them through.");
    await screenshot(page, "import-mirror-dry-run-references");
    // The page's words are the server's completion's: its job, linked, counted 2 deleted of the 3 considered.
    const told = (await forecast.locator(".quiet").textContent())!;
    const counted = await client().getJob(Number(/\(job (\d+)\)/.exec(told)![1]));
    expect(counted).toMatchObject({ operation: "syncCompletion", dryRun: true, importJobStatus: "PartiallySucceeded", output: { deleted: 2, total: 3, rejected: 1 } });
    expect(counted.output!.message).toStartWith("Dry run: nothing was applied. Would delete 2 of 3 sub area records; 1 would be rejected: ");
    expect(counted.output!.message).toContain(told.slice(told.indexOf("): ") + 3));
    expect(told).toContain("Would delete 2 of 3 sub area records; 1 would be rejected: [");
    expect((await server.query<{ id: string }>("SELECT id FROM sub_areas ORDER BY id")).map((r) => r.id)).toEqual(["centre", "east", "north", "south", "west"]);

    // Applying allows the 3 considered (maxDelete), and deletes the 2 it said.
    await page.getByRole("button", { name: "Apply: import the file and delete 2 records" }).click();
    const outcome = page.getByRole("region", { name: "Mirror outcome" });
    await outcome.waitFor({ timeout: 60_000 });
    expect(await outcome.textContent()).toMatch(/^Mirror \(sync \d+, job \d+ PartiallySucceeded\): Deleted 2 of 3 sub area records; 1 was rejected: /);
    expect((await server.query<{ id: string }>("SELECT id FROM sub_areas ORDER BY id")).map((r) => r.id)).toEqual(["east", "north", "south"]);
  }, 120_000);
}
