import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import type { BrowserContext, Page } from "playwright-core";
import { importBatch, waitForJob } from "../helpers/api";
import { requireChromium } from "../helpers/browser";
import { consoleContext, screenshot, sharedTab, signIn as signInAs } from "../helpers/console";
import { until } from "../helpers/until";
import { asset, assets, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";
import { notOverHttps } from "../helpers/backend";

// The console (DECISIONS 11) in headless Chromium, against a real server (SQLite, PostgreSQL and HTTPS in the
// three passes of npm test): sign-in, the jobs live, a job's page with its rejected records and their CSV, cancel,
// records. Each main screen is saved to test-artifacts/ for a person to look at.

if (requireChromium("the console in headless Chromium")) {
  let server: TestServer;
  let context: BrowserContext;
  let partial: number;
  let tab: () => Promise<Page>;

  beforeAll(async () => {
    server = await startTestServer();
    await seedReferenceData(server.base, server.key);
    // 20 assets of which 3 refer to a sub area that does not exist: PartiallySucceeded, 3 rejected.
    const records = [...assets(17), ...[0, 1, 2].map((i) => asset(100 + i, { subAreaId: "nowhere" }))];
    partial = (await importBatch(server.base, "assets", server.key, records)).id;
    expect((await waitForJob(server.base, server.key, partial)).importJobStatus).toBe("PartiallySucceeded");
    context = await consoleContext();
    tab = sharedTab(context);
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    await server?.close();
  });

  const signIn = (page: Page, key = server.key) => signInAs(page, server.url, key);

  notOverHttps("a wrong key is refused in words that name both causes, and nothing is kept", async () => {
    const page = await tab();
    await signIn(page, `${"0".repeat(64)}_1`);
    await expect(page.getByRole("alert").textContent()).resolves.toBe(
      "The API key was refused: it is wrong, or it is not a key of the environment 'default'. Check both and sign in again.",
    );
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    await screenshot(page, "sign-in-refused");
  }, 60_000);

  test("signed in with the keyboard alone: the key is in the tab's session storage, not in the URL or a cookie; the jobs are listed newest first and filtered", async () => {
    const page = await tab();
    await page.goto(`${server.url}/console`);
    await page.getByLabel("Environment").focus();
    await page.keyboard.press("Tab");
    await page.keyboard.type(server.key);
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Jobs" }).waitFor();
    expect(page.url()).not.toContain(server.key);
    expect(await context.cookies()).toEqual([]);
    expect(await page.evaluate(() => sessionStorage.getItem("importd.session"))).toContain(server.key);

    const ids = async () => (await page.locator("table.jobs tbody tr td:first-child a").allTextContents()).map(Number);
    expect(await until(ids, { holds: (shown) => shown.length === 4, what: "the 4 jobs listed" })).toHaveLength(4);
    expect(await ids()).toEqual([...(await ids())].sort((a, b) => b - a));
    await screenshot(page, "jobs");

    await page.getByLabel("Status").selectOption("PartiallySucceeded");
    expect(await until(ids, { holds: (shown) => shown.length === 1, what: "the one partial job listed" })).toEqual([partial]);
    // The filters are in the URL: the view can be sent to someone, and opens filtered once they have signed in (a new
    // tab has its own session storage, so it asks).
    expect(new URL(page.url()).hash).toBe("#/jobs?status=PartiallySucceeded");
    const shared = await context.newPage();
    await shared.goto(page.url());
    await shared.getByLabel("API key").fill(server.key);
    await shared.getByRole("button", { name: "Sign in" }).click();
    await shared.locator("table.jobs").waitFor();
    expect(await shared.getByLabel("Status").inputValue()).toBe("PartiallySucceeded");
    expect((await shared.locator("table.jobs tbody tr td:first-child a").allTextContents()).map(Number)).toEqual([partial]);
    await shared.close();
    await page.getByLabel("Status").selectOption("");
    await page.getByLabel("Type").selectOption("SubArea");
    expect(await until(ids, { holds: (shown) => shown.length === 1, what: "one job listed" })).toHaveLength(1);
    await page.getByLabel("Type").selectOption("");

    // Live: a job imported meanwhile appears without a reload.
    const later = await importBatch(server.base, "subareas", server.key, [{ id: "later", name: "Later" }]);
    expect(await until(ids, { holds: (shown) => shown.includes(later.id), what: `job ${later.id} listed` })).toContain(later.id);
  }, 60_000);

  notOverHttps("an environment without jobs says so, and its link leads to the Import screen", async () => {
    const empty = await server.addEnvironment("empty");
    const page = await tab();
    await signInAs(page, server.url, empty.key, empty.slug);
    await page.getByRole("heading", { name: "Jobs" }).waitFor();
    const note = page.getByText("No jobs yet");
    await note.waitFor();
    expect(await note.textContent()).toBe("No jobs yet: import a file here, with importd import, or POST to the API.");
    await screenshot(page, "jobs-empty");
    await note.getByRole("link", { name: "import a file" }).click();
    await page.getByRole("heading", { name: "Import a file" }).waitFor();
    expect(page.url()).toEndWith("#/import");
  }, 60_000);

  test("a job's page: counts, message and rejected records; the CSV downloaded is the CLI's, with _error and _index", async () => {
    const page = await tab();
    await signIn(page);
    await page.getByRole("link", { name: String(partial), exact: true }).click();
    await page.getByRole("heading", { name: `Job ${partial}` }).waitFor();
    const counts = page.getByLabel("Counts");
    await expect(counts.textContent()).resolves.toContain("Applied17");
    await expect(counts.textContent()).resolves.toContain("Rejected3");
    expect(await page.locator(".message").textContent()).toContain("3 of 20 records were rejected");
    expect(await until(() => page.locator("table.rejected tbody tr").count(), { holds: (rows) => rows === 3, what: "3 rejected records shown" })).toBe(3);
    await screenshot(page, "job");

    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Download the rejected records (CSV)" }).click()]);
    expect(download.suggestedFilename()).toBe(`job-${partial}-rejected.csv`);
    const csv = readFileSync((await download.path())!, "utf8").trim().split("\n");
    expect(csv[0]).toStartWith("id,");
    expect(csv[0]).toEndWith(",_error,_index");
    expect(csv.slice(1).map((line) => line.split(",")[0])).toEqual(["A-0000100", "A-0000101", "A-0000102"]);
    expect(csv.slice(1).every((line) => line.includes("nowhere"))).toBe(true);
  }, 60_000);

  test("a pending job is canceled from its page, and says so", async () => {
    const parked = await server.parkJob("default", "until released");
    const page = await tab();
    await signIn(page);
    await page.goto(`${server.url}/console#/jobs/${parked.id}`);
    await page.getByRole("button", { name: "Cancel this job" }).click();
    await page.locator(".status-failed").first().waitFor();
    expect(await page.locator(".message").textContent()).toStartWith("Canceled on request before it started: nothing was applied");
    expect(await page.getByRole("button", { name: "Cancel this job" }).count()).toBe(0);
    await parked.release();
    await screenshot(page, "job-canceled");
  }, 60_000);

  notOverHttps("records: one found by id, a missing one said so, and the resource paged", async () => {
    const page = await tab();
    await signIn(page);
    await page.getByRole("link", { name: "Records" }).click();
    await page.getByLabel("Id").fill("A-0000003");
    await page.getByRole("button", { name: "Find" }).click();
    const record = page.getByRole("article");
    await record.waitFor();
    expect(JSON.parse((await record.locator("pre").textContent())!)).toMatchObject({ id: "A-0000003", subAreaId: asset(3).subAreaId, lastJobId: partial });
    expect(await until(() => page.locator("table tbody tr").count(), { holds: (rows) => rows === 17, what: "17 rows shown" })).toBe(17);
    await screenshot(page, "records");
    await page.getByLabel("Id").fill("no-such-asset");
    await page.getByRole("button", { name: "Find" }).click();
    await expect(page.getByRole("alert").textContent()).resolves.toBe("No asset has the id 'no-such-asset' in the environment 'default'.");
  }, 60_000);

  notOverHttps("pages: on to the next page of a listing and back again", async () => {
    // 30 asset types beside the 2 seeded: a first page of 25 and a second of 7.
    const types = Array.from({ length: 30 }, (_, i) => ({ id: `type-${String(i).padStart(2, "0")}`, name: `Type ${i}` }));
    await waitForJob(server.base, server.key, (await importBatch(server.base, "assettypes", server.key, types)).id);
    const page = await tab();
    await signIn(page);
    await page.goto(`${server.url}/console#/records/assettypes`);
    const firstIds = () => page.locator("table tbody tr td:first-child").allTextContents();
    const first = await until(firstIds, { holds: (ids) => ids.length === 25, what: "a first page of 25 jobs" });
    expect(first).toHaveLength(25);
    expect(await page.getByRole("button", { name: "Previous" }).isDisabled()).toBe(true);
    await page.getByRole("button", { name: "Next" }).click();
    const second = await until(firstIds, { holds: (ids) => ids.length === 7, what: "a second page of 7 jobs" });
    expect(second).toHaveLength(7);
    expect(second.some((id) => first.includes(id))).toBe(false);
    expect(await page.getByRole("button", { name: "Next" }).isDisabled()).toBe(true);
    await page.getByRole("button", { name: "Previous" }).click();
    expect(await until(firstIds, { holds: (ids) => ids.length === 25, what: "the first page of 25 jobs again" })).toEqual(first);
  }, 60_000);

  notOverHttps("in a narrow window nothing spills sideways: the tables scroll within their box, the import form wraps", async () => {
    const narrow = await consoleContext(390);
    try {
      const page = await narrow.newPage();
      await signIn(page);
      await page.locator("table.jobs").waitFor();
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= innerWidth)).toBe(true);
      await screenshot(page, "jobs-narrow");
      await page.getByRole("link", { name: "Import" }).click();
      await page.getByRole("heading", { name: "Import a file" }).waitFor();
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= innerWidth)).toBe(true);
      await screenshot(page, "import-narrow");
    } finally {
      // The browser outlives this file: a page left open would go on polling a server that is gone.
      await narrow.close();
    }
  }, 60_000);
}
