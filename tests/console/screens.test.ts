import { afterAll, beforeAll, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { importBatch, postJson, waitForJob } from "../helpers/api";
import { requireChromium } from "../helpers/browser";
import { consoleContext, screenshot, sharedTab, signIn as signInAs } from "../helpers/console";
import { until } from "../helpers/until";
import { asset, assets, seedReferenceData } from "../helpers/records";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";

// The console as an operator reads it (issue 44, item 6), at 1280×800 and at 390 px wide: every main screen saved to
// test-artifacts/ (console-screen-*-1280.png, …-390.png) for a person to look at, and what read badly asserted: the
// rejected records' ids and places unbroken, their records wrapped between words, their reasons in the console's
// words, and a dry run's figures and message in the conditional.

const widths = [1280, 390] as const;

/** A 7-column CSV whose last cell, description, is empty, and whose rows on lines 11 and 12 name no such sub area. */
const csv = [
  "id,subAreaId,name,status,assetCategoryId,assetTypeId,shapeType,description",
  ...Array.from({ length: 11 }, (_, n) => `M-${n},${n >= 9 ? "nowhere" : "north"},Hauptleitung Müllerstraße ${n},ACT,water,pipe,LineString,`),
].join("\n") + "\n";

/** The console's words for the API's "Import it first with POST /v2/subareas, or correct the subAreaId." */
const consoleWords = "Import the sub areas first (Import, resource subareas), or correct the subAreaId.";

if (requireChromium("the console's screens in headless Chromium")) {
  const dir = tempDir("importd-console-screens-");
  let server: TestServer;
  let partial: number;
  let dry: number;

  beforeAll(async () => {
    server = await startTestServer();
    await seedReferenceData(server.base, server.key);
    // Long ids, the last records referring to a sub area that does not exist, with words that must not be broken.
    const records = [
      ...assets(7, 500_000).map((record) => ({ ...record, description: "Hauptleitung Müllerstraße, Gusseisen" })),
      ...[7, 8, 9].map((i) => asset(500_000 + i, { subAreaId: "nowhere", description: "Hauptleitung Müllerstraße, Gusseisen" })),
    ];
    partial = (await importBatch(server.base, "assets", server.key, records)).id;
    expect((await waitForJob(server.base, server.key, partial)).importJobStatus).toBe("PartiallySucceeded");
    // A dry run of 1,800 assets: the jobs list shows its figure, which nothing applied.
    const accepted = await postJson(server.base, "assets?dryRun=true", server.key, assets(1_800));
    expect(accepted.status).toBe(202);
    dry = ((await accepted.json()) as { id: number }).id;
    expect((await waitForJob(server.base, server.key, dry)).importJobStatus).toBe("Succeeded");
    writeFileSync(join(dir, "leitungen.csv"), csv);
  }, 120_000);

  afterAll(async () => {
    for (const context of contexts) await context.close();
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  // A tab per width, which that width's tests take turns in (sharedTab).
  const contexts: BrowserContext[] = [];
  const tabs = new Map<number, () => Promise<Page>>();
  async function open(width: number): Promise<Page> {
    if (!tabs.has(width)) {
      const context = await consoleContext(width);
      contexts.push(context);
      tabs.set(width, sharedTab(context));
    }
    return await tabs.get(width)!();
  }
  const fitsSideways = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth <= innerWidth);
  const style = (page: Page, selector: string, property: string) =>
    page.locator(selector).first().evaluate((element, name) => getComputedStyle(element).getPropertyValue(name), property);

  for (const width of widths) {
    test(`${width} px: sign-in, and the jobs list, where a dry run's figure says "would apply"`, async () => {
      const page = await open(width);
      await page.goto(`${server.url}/console`);
      await page.getByLabel("API key").waitFor();
      await screenshot(page, `screen-sign-in-${width}`);
      await signInAs(page, server.url, server.key);
      const row = page.locator("table.jobs tbody tr", { has: page.getByRole("link", { name: String(dry), exact: true }) });
      await row.waitFor();
      const cells = await row.locator("td").allTextContents();
      expect(cells[4]).toBe("would apply 1,800");
      const real = page.locator("table.jobs tbody tr", { has: page.getByRole("link", { name: String(partial), exact: true }) });
      expect((await real.locator("td").allTextContents())[4]).toBe("7");
      expect(await fitsSideways(page)).toBe(true);
      await screenshot(page, `screen-jobs-${width}`);
    }, 60_000);

    test(`${width} px: a job's rejected records: ids unbroken, reasons in the console's words, records wrapped between words`, async () => {
      const page = await open(width);
      await signInAs(page, server.url, server.key);
      await page.goto(`${server.url}/console#/jobs/${partial}`);
      const rows = page.locator("table.rejected tbody tr");
      expect(await until(() => rows.count(), { holds: (n) => n === 3, what: "3 rejected records shown" })).toBe(3);
      const first = await rows.first().locator("td").allTextContents();
      // The id is one line high, as the index beside it.
      const heights = await rows.first().locator("td").evaluateAll((cells) => cells.slice(0, 2).map((cell) => cell.getBoundingClientRect().height));
      // One comparison of every point, so that a failure shows each that does not hold.
      expect({
        id: first[1],
        reason: first[3],
        idWhiteSpace: await style(page, "table.rejected tbody td:nth-child(2)", "white-space"),
        idOneLine: heights[1] === heights[0],
        recordWordBreak: await style(page, "table.rejected tbody td:last-child", "word-break"),
        recordOverflowWrap: await style(page, "table.rejected tbody td:last-child", "overflow-wrap"),
      }).toEqual({
        id: "A-0500007",
        reason: `'Sub Area Id' 'nowhere' does not exist in this environment. ${consoleWords}`,
        idWhiteSpace: "nowrap",
        idOneLine: true,
        recordWordBreak: "normal",
        recordOverflowWrap: "break-word",
      });
      expect(await fitsSideways(page)).toBe(true);
      await screenshot(page, `screen-job-${width}`);
    }, 60_000);

    test(`${width} px: a dry run's page: its counts and message in the conditional`, async () => {
      const page = await open(width);
      await signInAs(page, server.url, server.key);
      await page.goto(`${server.url}/console#/jobs/${dry}`);
      await page.getByRole("heading", { name: `Job ${dry}` }).waitFor();
      expect({
        message: await page.locator(".message").textContent(),
        counts: await page.getByLabel("Counts").locator("dt").allTextContents(),
      }).toEqual({
        message: "Dry run: nothing was applied. All 1800 records would be applied (1800 created, 0 updated, 0 unchanged).",
        counts: ["Would apply", "Would create", "Would update", "Would leave unchanged", "Would reject"],
      });
      expect(await fitsSideways(page)).toBe(true);
      await screenshot(page, `screen-job-dry-run-${width}`);
    }, 60_000);

    test(`${width} px: the import screen's rejected rows: line numbers unbroken, no "|" after an empty last cell, reasons in the console's words`, async () => {
      const page = await open(width);
      await signInAs(page, server.url, server.key, "default");
      await page.getByRole("link", { name: "Import" }).click();
      await page.getByRole("heading", { name: "Import a file" }).waitFor();
      await screenshot(page, `screen-import-${width}`);
      await page.getByLabel("Resource").selectOption("assets");
      await page.getByLabel("File", { exact: true }).setInputFiles(join(dir, "leitungen.csv"));
      await page.getByRole("button", { name: "Check with a dry run" }).click();
      const verdict = page.getByRole("region", { name: "Dry run verdict" });
      await verdict.waitFor({ timeout: 60_000 });
      const rows = verdict.locator("table.rejected tbody tr");
      expect(await rows.count()).toBe(2);
      const cells = await rows.first().locator("td").allTextContents();
      expect({
        where: cells[0],
        reason: cells[1],
        record: cells[2]!.replaceAll("\u00a0", " "),
        whereWhiteSpace: await style(page, "table.rejected tbody td:first-child", "white-space"),
        recordWordBreak: await style(page, "table.rejected tbody td:last-child", "word-break"),
      }).toEqual({
        where: "line 11",
        reason: `'Sub Area Id' 'nowhere' does not exist in this environment. ${consoleWords}`,
        // Empty cells shown as "–", as the console shows nothing: no "|" dangling after the empty description.
        record: "M-9 | nowhere | Hauptleitung Müllerstraße 9 | ACT | water | pipe | LineString | –",
        whereWhiteSpace: "nowrap",
        recordWordBreak: "normal",
      });
      expect(await fitsSideways(page)).toBe(true);
      await screenshot(page, `screen-import-dry-run-${width}`);
    }, 90_000);

    test(`${width} px: records`, async () => {
      const page = await open(width);
      await signInAs(page, server.url, server.key);
      await page.getByRole("link", { name: "Records" }).click();
      await page.getByLabel("Id").fill("A-0500001");
      await page.getByRole("button", { name: "Find" }).click();
      await page.getByRole("article").waitFor();
      expect(await until(() => page.locator("table tbody tr").count(), { holds: (n) => n > 0, what: "records listed" })).toBeGreaterThan(0);
      // The ids are read whole here too ("A-/0500000" at 390 px before).
      expect(await style(page, "table tbody td:first-child", "white-space")).toBe("nowrap");
      expect(await fitsSideways(page)).toBe(true);
      await screenshot(page, `screen-records-${width}`);
    }, 60_000);
  }
}
