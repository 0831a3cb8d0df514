import { afterAll, beforeAll, expect, test } from "bun:test";
import type { BrowserContext, Page } from "playwright-core";
import { importBatch, waitForJob } from "../helpers/api";
import { requireChromium } from "../helpers/browser";
import { consoleContext, screenshot, sharedTab, signIn as signInAs } from "../helpers/console";
import { until } from "../helpers/until";
import { assets, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

// Delete jobs (DECISIONS 13) in the console: the jobs list and a job's page say a delete job is one, and count what
// it did as deleted, not found and rejected, never as created, updated or unchanged.

if (requireChromium("delete jobs in the console, in headless Chromium")) {
  let server: TestServer;
  let context: BrowserContext;
  let tab: () => Promise<Page>;
  let deletion: number;
  let refused: number;
  let imported: number;

  beforeAll(async () => {
    server = await startTestServer();
    await seedReferenceData(server.base, server.key);
    imported = (await importBatch(server.base, "assets", server.key, assets(3))).id;
    await waitForJob(server.base, server.key, imported);
    // Two of the assets and an id that names none: Succeeded, 2 deleted, 1 not found.
    deletion = (await importBatch(server.base, "deletions/assets", server.key, [assets(3)[0]!.id, assets(3)[1]!.id, "NEVER-IMPORTED"])).id;
    expect((await waitForJob(server.base, server.key, deletion)).output).toMatchObject({ deleted: 2, notFound: 1 });
    // A sub area that the third asset still names: rejected, the job Failed.
    refused = (await importBatch(server.base, "deletions/subareas", server.key, [assets(3)[2]!.subAreaId])).id;
    expect((await waitForJob(server.base, server.key, refused)).importJobStatus).toBe("Failed");
    context = await consoleContext();
    tab = sharedTab(context);
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    await server?.close();
  });

  const signIn = (page: Page) => signInAs(page, server.url, server.key);
  const rowOf = (page: Page, id: number) => page.locator("table.jobs tbody tr").filter({ has: page.getByRole("link", { name: String(id), exact: true }) });

  test("the jobs list tags a delete job and gives its deleted and not found; the Operation filter lists delete jobs alone", async () => {
    const page = await tab();
    await signIn(page);
    await rowOf(page, deletion).waitFor();
    const cells = await rowOf(page, deletion).locator("td").allTextContents();
    expect(cells.slice(1, 5)).toEqual(["Assetdelete", "Succeeded", "3", "deleted 2, 1 not found"]);
    expect(await rowOf(page, imported).locator("td").nth(1).textContent()).toBe("Asset");
    expect(await rowOf(page, refused).locator("td").allTextContents()).toContain("deleted 0");
    await screenshot(page, "jobs-with-deletes");

    await page.getByLabel("Operation").selectOption("delete");
    const ids = () => page.locator("table.jobs tbody tr td:first-child a").allTextContents();
    expect((await until(ids, { holds: (shown) => shown.length === 2, what: "the 2 delete jobs listed" })).map(Number)).toEqual([refused, deletion]);
    expect(new URL(page.url()).hash).toBe("#/jobs?operation=delete");
  }, 60_000);

  test("a delete job's page: its operation, and deleted, not found and rejected counts; its rejected ids with why", async () => {
    const page = await tab();
    await signIn(page);
    await page.getByRole("link", { name: String(deletion), exact: true }).click();
    await page.getByRole("heading", { name: `Job ${deletion}` }).waitFor();
    expect(await page.locator(".facts").textContent()).toContain("Operationdelete: a delete job, which deletes the records of the ids it was sent");
    const counts = await page.getByLabel("Counts").textContent();
    expect(counts).toBe("Deleted2Not found1Rejected0");
    await screenshot(page, "delete-job");

    await page.goto(`${server.url}/console#/jobs/${refused}`);
    await page.getByRole("heading", { name: `Job ${refused}` }).waitFor();
    expect(await page.getByLabel("Counts").textContent()).toBe("Deleted0Not found0Rejected1");
    await page.getByRole("heading", { name: "Rejected ids" }).waitFor();
    expect(await until(() => page.locator("table.rejected tbody tr").count(), { holds: (rows) => rows === 1, what: "the rejected id shown" })).toBe(1);
    expect(await page.locator("table.rejected tbody").textContent()).toContain("refer");
    await screenshot(page, "delete-job-rejected");
  }, 60_000);
}
