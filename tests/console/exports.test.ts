import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { importAndWait, waitForJob } from "../helpers/api";
import { requireChromium } from "../helpers/browser";
import { consoleContext, signIn } from "../helpers/console";
import { importd } from "../helpers/process";
import { asset, assets, seedReferenceData } from "../helpers/records";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";

// The records screen downloads the export (DECISIONS 14): the same file GET /v2/exports/<resource> gives, through the
// API with the page's key, and `importd import` takes it back leaving every record unchanged.

if (requireChromium("the console's export download in headless Chromium")) {
  let server: TestServer;
  const dir = tempDir("importd-console-export-");
  beforeAll(async () => {
    server = await startTestServer();
    await seedReferenceData(server.base, server.key);
  });
  afterAll(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("the records screen downloads every record of the resource, as CSV and as NDJSON, the API's export byte for byte", async () => {
    await importAndWait(server.base, "assets", server.key, [...assets(60), asset(100, { name: "=1+2" })]);
    const context = await consoleContext();
    try {
      const page = await context.newPage();
      await signIn(page, server.url, server.key);
      await page.goto(`${server.url}/console#/records/assets`);
      for (const format of ["CSV", "NDJSON"] as const) {
        const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: `Download all assets (${format})` }).click()]);
        expect(download.suggestedFilename()).toBe(`assets.${format.toLowerCase()}`);
        const text = readFileSync((await download.path())!, "utf8");
        const api = await fetch(`${server.base}/v2/exports/assets`, { headers: { "api-key": server.key, accept: format === "CSV" ? "text/csv" : "application/x-ndjson" } });
        expect(text).toBe(await api.text());
        const file = join(dir, `downloaded.${format.toLowerCase()}`);
        writeFileSync(file, text);
        const imported = await importd(["import", file, "--resource", "assets", "--base-url", server.base], { IMPORTD_API_KEY: server.key });
        expect(imported.code).toBe(0);
        const jobId = Number(/\(job (\d+)\)\.\n/.exec(imported.stdout)![1]);
        expect((await waitForJob(server.base, server.key, jobId)).output).toMatchObject({ created: 0, updated: 0, unchanged: 61 });
      }
    } finally {
      await context.close();
    }
  }, 60_000);
}
