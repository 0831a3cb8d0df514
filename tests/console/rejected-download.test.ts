import { afterAll, beforeAll, expect, test } from "bun:test";
import { parse } from "csv-parse/sync";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { importAndWait } from "../helpers/api";
import { requireChromium } from "../helpers/browser";
import { consoleContext, signIn } from "../helpers/console";
import { importd } from "../helpers/process";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";

// The console's download of a job's rejected records is the CLI's CSV (DECISIONS 15): cells a spreadsheet would run
// as formulas come with a quote before them, and `importd import` reads the file back exactly.

if (requireChromium("the console's rejected-records download in headless Chromium")) {
  let server: TestServer;
  const dir = tempDir("importd-console-download-");
  beforeAll(async () => {
    server = await startTestServer();
    await seedReferenceData(server.base, server.key);
  });
  afterAll(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("the downloaded CSV neutralizes formulas, a leading quote and negative numbers; fixed, it imports the values as they were sent", async () => {
    const sent = [
      asset(1, { subAreaId: "west", name: '=HYPERLINK("http://evil.example","click")', geolocation: { ...asset(1).geolocation, locationStart: -4 } }),
      asset(2, { subAreaId: "west", name: "'quoted", description: "+SUM(1,2)" }),
    ];
    const job = await importAndWait(server.base, "assets", server.key, sent);
    const context = await consoleContext();
    try {
      const page = await context.newPage();
      await signIn(page, server.url, server.key);
      await page.goto(`${server.url}/console#/jobs/${job.id}`);
      const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Download the rejected records (CSV)" }).click()]);
      const csv = readFileSync((await download.path())!, "utf8");
      const [columns, ...rows] = parse(csv) as string[][];
      expect(rows.flat().filter((cell) => /^[=+\-@\t\r]/.test(cell))).toEqual([]);
      const cell = (at: number, name: string) => rows[at]![columns!.indexOf(name)];
      expect([cell(0, "name"), cell(0, "geolocation.locationStart"), cell(1, "name"), cell(1, "description")]).toEqual([`'=HYPERLINK("http://evil.example","click")`, "'-4", "''quoted", "'+SUM(1,2)"]);

      const file = join(dir, "downloaded.csv");
      writeFileSync(file, csv.replaceAll(",west,", ",north,"));
      const imported = await importd(["import", file, "--resource", "assets", "--base-url", server.base], { IMPORTD_API_KEY: server.key });
      expect(imported.code).toBe(0);
      for (const record of sent) {
        const { updatedAt: _u, lastJobId: _l, ...stored } = await (await fetch(`${server.base}/v2/assets/${record.id}`, { headers: { "api-key": server.key } })).json();
        expect(stored).toEqual({ ...record, subAreaId: "north" });
      }
    } finally {
      await context.close();
    }
  }, 60_000);
}
