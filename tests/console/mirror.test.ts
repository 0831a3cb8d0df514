import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, BrowserContext } from "playwright-core";
import { createClient } from "../../src/client";
import { testTls } from "../helpers/backend";
import { requireChromium } from "../helpers/browser";
import { consoleBrowser, screenshot, signIn } from "../helpers/console";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";

// The console's mirror (DECISIONS 13): the import screen's "Mirror" box; its dry run says what applying would delete
// before anything is applied (reckoned by the page: a dry-run import marks nothing in a sync); applying sends the file
// in a sync and completes it, deleting at most what the dry run showed.

const header = "id,subAreaId,name,status,assetCategoryId,assetTypeId,shapeType";
const row = (i: number) => `${asset(i).id},north,Main ${i},ACT,water,pipe,Point`;

if (requireChromium("the console's mirror in headless Chromium")) {
  const dir = tempDir("importd-console-mirror-");
  let server: TestServer;
  let browser: Browser;
  let context: BrowserContext;

  beforeAll(async () => {
    server = await startTestServer();
    await seedReferenceData(server.base, server.key);
    ({ browser, context } = await consoleBrowser());
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const client = () => createClient({ baseUrl: server.base, apiKey: server.key, ca: testTls ? readFileSync(testTls.cert, "utf8") : undefined });
  const storedIds = async () => (await server.query<{ id: string }>("SELECT id FROM assets ORDER BY id")).map((r) => r.id);

  test("the dry run of a mirror says it would delete 5 of 20 before anything is applied; applying deletes exactly those, in one sync", async () => {
    await client().waitForJob((await client().importRecords("assets", Array.from({ length: 20 }, (_, i) => asset(i)) as never)).id);
    const file = join(dir, "assets-today.csv");
    writeFileSync(file, [header, ...Array.from({ length: 15 }, (_, i) => row(i + 5))].join("\n") + "\n");

    const page = await context.newPage();
    await signIn(page, server.url, server.key);
    await page.getByRole("link", { name: "Import" }).click();
    await page.getByRole("heading", { name: "Import a file" }).waitFor();
    await page.getByLabel("Resource").selectOption("assets");
    await page.getByLabel("Mirror: delete the records of assets that the file does not have").check();
    await page.getByLabel("File", { exact: true }).setInputFiles(file);
    await page.getByRole("button", { name: "Check with a dry run" }).click();
    const forecast = page.getByRole("region", { name: "Mirror forecast" });
    await forecast.waitFor({ timeout: 60_000 });
    const said = await forecast.locator(".verdict").textContent();
    expect(said).toStartWith("Mirror: would delete 5 of the 20 records of assets (25%), those importd has that the file does not.");
    expect(said).toContain(`They are: ${Array.from({ length: 5 }, (_, i) => asset(i).id).join(", ")}.`);
    expect(await forecast.locator(".hint").textContent()).toContain("more than the 10% importd deletes by default: applying allows these 5.");
    await screenshot(page, "import-mirror-dry-run");
    // The dry run applied nothing, deleted nothing, and opened no sync.
    expect(await storedIds()).toHaveLength(20);
    expect(await client().getSync(1).catch((e) => e)).toMatchObject({ status: 404 });

    await page.getByRole("button", { name: "Apply: import the file and delete at most 5 records" }).click();
    const outcome = page.getByRole("region", { name: "Mirror outcome" });
    await outcome.waitFor({ timeout: 60_000 });
    const told = (await outcome.textContent())!;
    expect(told).toMatch(/^Mirror \(sync 1, job \d+ Succeeded\): Deleted 5 of 5 asset records\./);
    expect(await storedIds()).toEqual(Array.from({ length: 15 }, (_, i) => asset(i + 5).id));
    const sync = await client().getSync(1);
    expect(sync).toMatchObject({ state: "completed", recordsSent: 15 });
    expect(sync.jobs.map((job) => job.operation)).toEqual(["upsert", "syncCompletion"]);
    // At most what the dry run showed: the completion was queued with maxDelete=5.
    expect(sync.lastCompletion?.output?.deleted).toBe(5);
    await screenshot(page, "import-mirror-done");
    await page.close();
  }, 120_000);
}
