import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { createClient } from "../../src/client";
import { testTls } from "../helpers/backend";
import { requireChromium } from "../helpers/browser";
import { consoleContext, sharedTab, screenshot, signIn } from "../helpers/console";
import { heldRequests, type HeldRequests } from "../helpers/held-requests";
import { until } from "../helpers/until";
import { seedReferenceData } from "../helpers/records";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";

// The console's import (DECISIONS 11) in headless Chromium, through the file picker, against a real server: a CSV
// with 30 bad rows checked with a dry run, applied, its rejected records downloaded, fixed and imported again; a
// reload, a Stop and a sign-out in the middle of an import.
//
// The server takes at most 200 KB a request, as a proxy's limit would (nginx's is 1 MB): the page makes its requests
// a quarter of the size after each 413, so that a file of a few thousand rows (a megabyte) is several requests, as a
// file of hundreds of megabytes is at the default size. The files are no bigger than that needs: what is proven here
// is the flow (dry run, apply, reload, Stop, sign-out, rejected rows), not size, which tests/console/import-large
// proves; every row costs the browser, the proxy and the server CPU, and these files were four times the size. The page
// talks to the server through a proxy of the test's (tests/helpers/held-requests.ts) that holds the import's second
// request until the test has acted: the import is still being sent when the page is reloaded or stopped, however fast
// or busy the machine.

const maxBodyBytes = 200_000;

const header =
  "id,subAreaId,name,description,status,assetCategoryId,assetTypeId,shapeType,startPoint,endPoint,geolocation.linearReferenceStart,geolocation.linearReferenceEnd,geolocation.locationStart,geolocation.locationEnd,geolocation.locationUnit";

/** A CSV row of an asset; `bad` makes it one the import rejects, of one of two kinds. */
function row(prefix: string, n: number, bad?: "reference" | "number"): string {
  const subArea = bad === "reference" ? "nowhere" : n % 2 ? "north" : "south";
  const start = bad === "number" ? "twelve" : String(n % 100);
  return `${prefix}-${n},${subArea},"Water main ${n}, between the mill and the station",Laid in ${1950 + (n % 70)},ACT,water,${n % 3 ? "pipe" : "valve"},LineString,${start},${(n % 100) + 50.5},LR-${n % 997},LR-${(n % 997) + 1},${n % 50},${(n % 50) + 10},m`;
}

if (requireChromium("the console's import in headless Chromium")) {
  const dir = tempDir("importd-console-import-");
  let server: TestServer;
  let context: BrowserContext;
  let tab: () => Promise<Page>;
  let environment: { slug: string; key: string; base: string };
  let proxy: HeldRequests;

  beforeAll(async () => {
    server = await startTestServer({ maxBodyBytes });
    proxy = heldRequests(server.url);
    environment = await server.addEnvironment("imports");
    await seedReferenceData(environment.base, environment.key);
    context = await consoleContext();
    tab = sharedTab(context);
  }, 60_000);

  afterEach(() => proxy.release());
  afterAll(async () => {
    proxy?.close();
    await context?.close();
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const client = () => createClient({ baseUrl: environment.base, apiKey: environment.key, ca: testTls ? readFileSync(testTls.cert, "utf8") : undefined });

  /** The import's requests that the server takes (not its first try, too big: 413), past the dry run's. */
  const importRequest = (request: Request) =>
    request.method === "POST" && new URL(request.url).pathname.endsWith("/v2/assets") && Number(request.headers.get("content-length")) <= maxBodyBytes;

  /** Once its first request was queued, the import is held in flight: the proxy holds its second until released. */
  async function heldInFlight(page: Page) {
    const queuedSoFar = () => page.evaluate(() => (JSON.parse(sessionStorage.getItem("importd.import") ?? "null")?.run.entries.length ?? 0) as number);
    expect(await until(queuedSoFar, { holds: (n) => n > 0, deadlineMs: 30_000, what: "a request queued" })).toBe(1);
    expect(await until(async () => proxy.held(), { holds: (n) => n === 1, deadlineMs: 30_000, what: "the next request held" })).toBe(1);
  }

  /**
   * A file of `rows` good assets, checked with a dry run and then being applied, its first request queued and its
   * second held (heldInFlight); answers the page.
   */
  async function applying(name: string, rows: number): Promise<Page> {
    const file = join(dir, name);
    writeFileSync(file, [header, ...Array.from({ length: rows }, (_, n) => row(name.slice(0, 3).toUpperCase(), n))].join("\n") + "\n");
    const page = await openImport();
    await page.getByLabel("Resource").selectOption("assets");
    await page.getByLabel("File", { exact: true }).setInputFiles(file);
    await page.getByRole("button", { name: "Check with a dry run" }).click();
    await page.getByRole("button", { name: "Apply: import the file" }).waitFor({ timeout: 60_000 });
    proxy.holdAfter(1, importRequest);
    await page.getByRole("button", { name: "Apply: import the file" }).click();
    await heldInFlight(page);
    return page;
  }

  async function openImport(): Promise<Page> {
    const page = await tab();
    await signIn(page, proxy.url, environment.key, environment.slug);
    await page.getByRole("link", { name: "Import" }).click();
    await page.getByRole("heading", { name: "Import a file" }).waitFor();
    return page;
  }

  test("a 3,000-row CSV with 30 bad rows through the file picker: dry run, apply, PartiallySucceeded, the rejected CSV downloaded, fixed and imported again", async () => {
    // 20 rows refer to a sub area that does not exist (rejected by their job), 10 have a word for a number (rejected
    // before they are sent).
    const badRows = new Map<number, "reference" | "number">();
    // At most 200 rows apart, the last near the end, so that each request (about 300 rows) holds a rejected one.
    for (let k = 29; k >= 0; k--) badRows.set(2_998 - k * 100, k % 3 === 2 ? "number" : "reference");
    const file = join(dir, "assets.csv");
    writeFileSync(file, [header, ...Array.from({ length: 3_000 }, (_, n) => row("WEB", n, badRows.get(n)))].join("\n") + "\n");

    const page = await openImport();
    await page.getByLabel("Resource").selectOption("assets");
    await page.getByLabel("File", { exact: true }).setInputFiles(file);
    await page.getByRole("button", { name: "Check with a dry run" }).click();
    const verdict = page.getByRole("region", { name: "Dry run verdict" });
    await verdict.waitFor({ timeout: 60_000 });
    expect(await verdict.locator(".verdict").textContent()).toStartWith("Of 3,000 records, applying would create 2,970, update 0 and leave 0 unchanged; 30 would be rejected.");
    expect(await verdict.locator("table.rejected tbody tr").count()).toBe(30);
    expect(await verdict.locator("table.rejected tbody").textContent()).toContain("line 400");
    await screenshot(page, "import-dry-run");
    await screenshot(page, "import-dry-run-top", 1_000);
    // A dry run applies nothing.
    expect((await client().listRecords("assets", { limit: 1 })).items).toEqual([]);

    proxy.holdAfter(1, importRequest);
    await page.getByRole("button", { name: "Apply: import the file" }).click();
    await page.getByLabel("Import progress").waitFor({ timeout: 30_000 });
    // Some records done and some to go (the second request held), for the screenshot of the progress bar.
    await heldInFlight(page);
    const progressText = () => page.locator(".running p").first().textContent({ timeout: 1_000 }).catch(() => undefined);
    await until(progressText, { holds: (text) => !text?.startsWith("0 of"), deadlineMs: 30_000, what: "progress past 0 rows" });
    await screenshot(page, "import-progress");
    proxy.release();
    const result = page.getByRole("region", { name: "Import result" });
    await result.waitFor({ timeout: 120_000 });
    const summary = await result.locator(".verdict").textContent();
    expect(summary).toMatch(/^3,000 records: 2,970 applied \(2,970 created, 0 updated, 0 unchanged\), 30 rejected, in \d+ jobs\.$/);
    const jobs = Number(/in (\d+) jobs/.exec(summary!)![1]);
    expect(jobs).toBeGreaterThan(1);
    expect(await result.locator(".status-partiallysucceeded").count()).toBe(jobs);
    await screenshot(page, "import-done");

    const [download] = await Promise.all([page.waitForEvent("download"), result.getByRole("button", { name: /^Download the rejected records/ }).click()]);
    expect(download.suggestedFilename()).toBe("assets.rejected.csv");
    const rejected = readFileSync((await download.path())!, "utf8").trimEnd().split("\n");
    expect(rejected[0]).toBe(`${header},_error,_line`);
    expect(rejected).toHaveLength(31);
    expect(rejected.slice(1).map((line) => Number(line.split(",").at(-1)))).toEqual([...badRows.keys()].map((n) => n + 2));
    expect(rejected.filter((line) => line.includes("nowhere"))).toHaveLength(20);

    // The person fixes the file as it came (a sub area that exists, a number) and imports it as it is.
    const fixed = join(dir, "assets.rejected.csv");
    writeFileSync(fixed, rejected.map((line) => line.replace(",nowhere,", ",north,").replace(",twelve,", ",12,")).join("\n") + "\n");
    await page.getByLabel("File", { exact: true }).setInputFiles(fixed);
    await page.getByRole("button", { name: "Check with a dry run" }).click();
    await verdict.waitFor({ timeout: 30_000 });
    expect(await verdict.locator(".verdict").textContent()).toStartWith("Of 30 records, applying would create 30, update 0 and leave 0 unchanged; 0 would be rejected.");
    await page.getByRole("button", { name: "Apply: import the file" }).click();
    await result.waitFor({ timeout: 30_000 });
    expect(await result.locator(".verdict").textContent()).toBe("30 records: 30 applied (30 created, 0 updated, 0 unchanged), 0 rejected, in 1 job.");
    expect(await result.locator(".status-succeeded").count()).toBe(1);
    const stored = await client().getRecord("assets", "WEB-2998");
    expect(stored).toMatchObject({ id: "WEB-2998", subAreaId: "north" });
    expect(await page.evaluate(() => sessionStorage.getItem("importd.import"))).toBeNull();
  }, 240_000);

  test("a reload in the middle of applying says what had been queued; the same file chosen again sends only the rest", async () => {
    // Several requests (about 400 KB of JSON against the server's 200 KB), read and sent one after another.
    const rows = 1_000;
    const file = join(dir, "resumed.csv");
    const page = await applying("resumed.csv", rows);

    type Saved = { run: { entries: Array<{ jobId: number | null }> } };
    const saved = () => page.evaluate(() => JSON.parse(sessionStorage.getItem("importd.import") ?? "null") as Saved | null);
    await page.reload();
    proxy.release();
    expect(await saved()).not.toBeNull();
    const queued = (await saved())!.run.entries.flatMap(({ jobId }) => (jobId === null ? [] : [jobId]));
    expect(queued.length).toBeGreaterThan(0);

    await page.getByRole("heading", { name: "Import a file" }).waitFor();
    const note = page.getByRole("status", { name: "Interrupted import" });
    const said = await note.textContent();
    expect(said).toContain(`The import of resumed.csv (`);
    expect(said).toContain(`${queued.length} request${queued.length === 1 ? " had" : "s had"} been queued, as job${queued.length === 1 ? "" : "s"} ${queued.join(", ")}: importd applies ${queued.length === 1 ? "it" : "them"} whatever happens to this page.`);
    expect(said).toContain("To send the rest, choose resumed.csv again (the same file, unchanged) with assets; what was queued is not sent again.");
    await screenshot(page, "import-interrupted");

    await page.getByLabel("Resource").selectOption("assets");
    await page.getByLabel("File", { exact: true }).setInputFiles(file);
    await note.getByText("This is its file: resume, and what was queued is not sent again.").waitFor();
    // Its first request held until the test has looked: the rest of 1,000 rows is done in a moment on a fast machine.
    proxy.holdAfter(0, importRequest);
    await page.getByRole("button", { name: "Resume the import" }).click();
    expect(await until(async () => proxy.held(), { holds: (n) => n === 1, deadlineMs: 30_000, what: "the resumed import's request held" })).toBe(1);
    // The import goes on while the person looks at the jobs it queues; the menu says how far it is.
    await page.getByRole("link", { name: "Jobs" }).click();
    await page.locator("table.jobs").waitFor();
    expect(await page.getByRole("link", { name: /^Import/ }).textContent()).toMatch(/^Import(running|\d+%)$/);
    proxy.release();
    await page.getByRole("link", { name: /^Import/ }).click();
    const result = page.getByRole("region", { name: "Import result" });
    await result.waitFor({ timeout: 120_000 });
    const summary = (await result.locator(".verdict").textContent())!;
    expect(summary).toStartWith(`1,000 records: 1,000 applied (1,000 created, 0 updated, 0 unchanged), 0 rejected, in `);
    // Those queued before the reload, and perhaps one whose answer the reload cut off (its Idempotency-Key recognized).
    const earlier = Number(/ (\d+) jobs? had been queued before the interruption and (was|were) not sent again\.$/.exec(summary)?.[1]);
    expect(earlier === queued.length || earlier === queued.length + 1).toBe(true);
    const jobIds = (await result.getByRole("link", { name: /^Job \d+$/ }).allTextContents()).map((text) => Number(text.slice(4)));
    expect(jobIds.slice(0, queued.length)).toEqual(queued);
    // The reload came with the first job queued and the second request held: the rest was sent after it.
    expect(jobIds.length).toBeGreaterThan(queued.length);
    // Every record once: the jobs' applied counts add up to the file's rows, and no chunk was sent twice.
    const jobs = await Promise.all(jobIds.map((id) => client().getJob(id)));
    expect(jobs.reduce((sum, job) => sum + (job.output?.applied ?? 0), 0)).toBe(rows);
    expect(await page.evaluate(() => sessionStorage.getItem("importd.import"))).toBeNull();
    expect(await note.count()).toBe(0);
  }, 240_000);

  test("a column the resource does not define stops the import before anything is sent, in the console's words; ticking the box imports without it", async () => {
    const file = join(dir, "misspelled.csv");
    writeFileSync(file, "id,name,descripton\nSUB-1,First,gone\nSUB-2,Second,gone\n");
    const page = await openImport();
    await page.getByLabel("Resource").selectOption("subareas");
    await page.getByLabel("File", { exact: true }).setInputFiles(file);
    await page.getByRole("button", { name: "Check with a dry run" }).click();
    const problem = await page.getByRole("alert").textContent();
    expect(problem).toStartWith("misspelled.csv: 1 column is not a field of subareas, and would not be imported:");
    expect(problem).toContain("'descripton' (line 1, column 3): did you mean description?");
    expect(problem).toContain('Rename it in the file, or tick "Ignore unknown columns" to import the file without it. Nothing was sent.');
    await screenshot(page, "import-unknown-column");
    expect((await client().listJobs({ type: "SubArea" })).items).toHaveLength(1); // the seeding's only

    await page.getByLabel("Ignore unknown columns").check();
    await page.getByRole("button", { name: "Check with a dry run" }).click();
    const verdict = page.getByRole("region", { name: "Dry run verdict" });
    expect(await verdict.locator(".verdict").textContent({ timeout: 30_000 })).toBe("Of 2 records, applying would create 2, update 0 and leave 0 unchanged; 0 would be rejected.");
    expect(await verdict.locator(".quiet").textContent()).toBe("Not imported, as asked: 'descripton'.");
  }, 60_000);

  test("a server that refuses big requests (413, as a proxy's limit would) gets the same import in smaller ones", async () => {
    const file = join(dir, "through-a-proxy.csv");
    writeFileSync(file, [header, ...Array.from({ length: 2_000 }, (_, n) => row("PRX", n))].join("\n") + "\n");
    const page = await openImport();
    await page.getByLabel("Resource").selectOption("assets");
    await page.getByLabel("File", { exact: true }).setInputFiles(file);
    await page.getByRole("button", { name: "Check with a dry run" }).click();
    await page.getByRole("button", { name: "Apply: import the file" }).click({ timeout: 60_000 });
    const result = page.getByRole("region", { name: "Import result" });
    await result.waitFor({ timeout: 60_000 });
    const summary = (await result.locator(".verdict").textContent())!;
    expect(summary).toStartWith("2,000 records: 2,000 applied (2,000 created, 0 updated, 0 unchanged), 0 rejected, in ");
    // About 750 KB of JSON in requests under 200 KB each (the server's --max-body-bytes here).
    expect(Number(/in (\d+) jobs/.exec(summary)?.[1])).toBeGreaterThanOrEqual(4);
  }, 120_000);

  test("Stop in the middle of applying: the page says what had been queued, and the same file resumes from there", async () => {
    const rows = 1_000;
    const page = await applying("stopped.csv", rows);
    await page.getByRole("button", { name: "Stop" }).click();
    proxy.release();
    const note = page.getByRole("status", { name: "Interrupted import" });
    expect(await note.textContent()).toContain("The import of stopped.csv (");
    expect(await note.textContent()).toContain("This is its file: resume, and what was queued is not sent again.");
    await page.getByRole("button", { name: "Resume the import" }).click();
    const result = page.getByRole("region", { name: "Import result" });
    await result.waitFor({ timeout: 60_000 });
    expect(await result.locator(".verdict").textContent()).toStartWith("1,000 records: 1,000 applied (1,000 created, 0 updated, 0 unchanged), 0 rejected, in ");
    const jobIds = (await result.getByRole("link", { name: /^Job \d+$/ }).allTextContents()).map((text) => Number(text.slice(4)));
    const jobs = await Promise.all(jobIds.map((id) => client().getJob(id)));
    expect(jobs.reduce((sum, job) => sum + (job.output?.applied ?? 0), 0)).toBe(rows);
  }, 120_000);

  test("signing out stops a running import (its worker holds the key); signed in again, the page says what had been queued", async () => {
    const page = await applying("signed-out.csv", 1_000);
    expect(page.workers()).toHaveLength(1);
    await page.getByRole("button", { name: "Sign out" }).click();
    expect(await until(async () => page.workers().length, { holds: (workers) => workers === 0, what: "the page's workers gone" })).toBe(0);
    await page.getByLabel("Environment").fill(environment.slug);
    await page.getByLabel("API key").fill(environment.key);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("link", { name: "Import" }).click();
    expect(await page.getByRole("status", { name: "Interrupted import" }).textContent()).toContain("The import of signed-out.csv (");
  }, 120_000);
}
