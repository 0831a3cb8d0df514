import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { parse } from "csv-parse/sync";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { importAndWait } from "../helpers/api";
import { importd } from "../helpers/process";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";

// Rejected-record CSVs (DECISIONS 15, OWASP CSV injection): a cell a spreadsheet would run as a formula is written
// with a quote before it, and importd reads its own rejected file back exactly, so that a value sent as `=1+2`, `-5`
// or `'abc`, rejected, fixed and imported again, arrives as it was sent.

let server: TestServer;
const dir = tempDir("importd-csv-injection-");
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const formulaStart = /^[=+\-@\t\r]/;
const header = "id,subAreaId,name,status,assetCategoryId,assetTypeId,shapeType,startPoint,endPoint,geolocation.linearReferenceStart,geolocation.linearReferenceEnd,geolocation.locationStart,geolocation.locationEnd,geolocation.locationUnit";
// What each record must arrive as, once fixed: names and references a spreadsheet would run, negative numbers
// (in the fields that allow them).
const expected = [
  { id: "INJ-1", name: "=1+2", startPoint: 5, endPoint: 10, geolocation: { linearReferenceStart: "@SUM(A1)", linearReferenceEnd: "+1", locationStart: -3.5, locationEnd: 7, locationUnit: "m" } },
  { id: "INJ-2", name: "'quoted", startPoint: 0, endPoint: 1, geolocation: { linearReferenceStart: "''twice", linearReferenceEnd: "-LR", locationStart: 0, locationEnd: 1, locationUnit: "m" } },
  { id: "INJ-3", name: "\tTabbed", startPoint: 1, endPoint: 2, geolocation: { linearReferenceStart: '=HYPERLINK("http://x.example","y")', linearReferenceEnd: "plain", locationStart: -2, locationEnd: -1, locationUnit: "m" } },
];
const csvCell = (value: string | number) => (/[",\t\r\n]/.test(String(value)) ? `"${String(value).replaceAll('"', '""')}"` : String(value));
const row = (record: (typeof expected)[number], subAreaId: string) =>
  [record.id, subAreaId, record.name, "ACT", "water", "pipe", "LineString", record.startPoint, record.endPoint, record.geolocation.linearReferenceStart, record.geolocation.linearReferenceEnd, record.geolocation.locationStart, record.geolocation.locationEnd, "m"].map(csvCell).join(",");

async function storedAsset(id: string): Promise<Record<string, unknown>> {
  const { updatedAt: _u, lastJobId: _l, ...fields } = await (await fetch(`${server.base}/v2/assets/${id}`, { headers: { "api-key": server.key } })).json();
  return fields;
}
const noCellRunsAsFormula = (text: string) => (parse(text, { relax_column_count: true }) as string[][]).flat().filter((cell) => formulaStart.test(cell));

describe("rejected-record CSVs", () => {
  test("importd import: the rejected file neutralizes formulas and negative numbers; fixed and imported again, every value arrives exactly", async () => {
    const file = join(dir, "assets.csv");
    writeFileSync(file, [header, ...expected.map((record) => row(record, "west"))].join("\n") + "\n");
    const first = await importd(["import", file, "--resource", "assets", "--base-url", server.base], { IMPORTD_API_KEY: server.key });
    expect(first.stdout).toContain("3 records, 0 applied, 3 rejected");

    const rejectedPath = join(dir, "assets.rejected.csv");
    const rejected = readFileSync(rejectedPath, "utf8");
    expect(noCellRunsAsFormula(rejected)).toEqual([]);
    const rows = parse(rejected) as string[][];
    expect(rows[0]).toEqual([...header.split(","), "_error", "_line"]);
    expect(rows[1]!.slice(0, 14)).toEqual(["INJ-1", "west", "'=1+2", "ACT", "water", "pipe", "LineString", "5", "10", "'@SUM(A1)", "'+1", "'-3.5", "7", "m"]);
    expect(rows[2]![2]).toBe("''quoted");
    expect(rows[2]![9]).toBe("'''twice");
    expect(rows[3]![2]).toBe("'\tTabbed");

    // Fixed as a person would, in the file itself.
    writeFileSync(rejectedPath, rejected.replaceAll(",west,", ",south,"));
    const second = await importd(["import", rejectedPath, "--resource", "assets", "--base-url", server.base], { IMPORTD_API_KEY: server.key });
    expect({ code: second.code, stdout: second.stdout }).toMatchObject({ code: 0, stdout: expect.stringContaining("3 records, 3 applied, 0 rejected") });
    for (const record of expected) expect(await storedAsset(record.id)).toMatchObject({ ...record, subAreaId: "south" });
  }, 60_000);

  test("a CSV that is not a rejected file is read as it is: a leading quote is data", async () => {
    const file = join(dir, "quoted.csv");
    writeFileSync(file, `${header}\n${row({ ...expected[1]!, id: "INJ-9" }, "north")}\n`);
    const run = await importd(["import", file, "--resource", "assets", "--base-url", server.base], { IMPORTD_API_KEY: server.key });
    expect(run.code).toBe(0);
    expect(await storedAsset("INJ-9")).toMatchObject({ name: "'quoted", geolocation: { linearReferenceStart: "''twice" } });
  }, 60_000);

  test("importd jobs rejected: the same neutralized CSV, which importd import reads back exactly", async () => {
    const sent = [asset(70, { subAreaId: "west", name: "=1+2", geolocation: { ...asset(70).geolocation, locationStart: -5 } }), asset(71, { subAreaId: "west", name: "'quoted", description: "@mention" })];
    const job = await importAndWait(server.base, "assets", server.key, sent);
    const listed = await importd(["jobs", "rejected", String(job.id), "--base-url", server.base], { IMPORTD_API_KEY: server.key });
    expect(listed.code).toBe(0);
    expect(noCellRunsAsFormula(listed.stdout)).toEqual([]);
    const [columns, ...rows] = parse(listed.stdout) as string[][];
    const cell = (at: number, name: string) => rows[at]![columns!.indexOf(name)];
    expect([cell(0, "name"), cell(0, "geolocation.locationStart"), cell(1, "name"), cell(1, "description")]).toEqual(["'=1+2", "'-5", "''quoted", "'@mention"]);

    const file = join(dir, "job-rejected.csv");
    writeFileSync(file, listed.stdout.replaceAll(",west,", ",north,"));
    const imported = await importd(["import", file, "--resource", "assets", "--base-url", server.base], { IMPORTD_API_KEY: server.key });
    expect(imported.code).toBe(0);
    for (const record of sent) expect(await storedAsset(record.id)).toEqual({ ...record, subAreaId: "north" });
  }, 60_000);
});
