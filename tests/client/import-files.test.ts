import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { importd, projectRoot, importdCommand } from "../helpers/process";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";

// `importd import` on files as people really have them (DECISIONS 12, issue 30): duplicates, misspelled columns,
// other delimiters, broken quotes, binary files, mixed line endings, rejected files being fixed. Each through the
// real CLI against a real server; the terminal's view in a pty where it matters.

let server: TestServer;
const dir = tempDir("importd-files-");
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const run = (file: string, extra: string[] = [], resource = "assets") =>
  importd(["import", file, "--resource", resource, "--base-url", server.base, ...extra], { IMPORTD_API_KEY: server.key });
const write = (name: string, text: string | Uint8Array) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const jobCount = async () => Number((await server.query<{ n: number }>("SELECT count(*) AS n FROM jobs"))[0]!.n);
const storedName = async (id: string) => (await server.query<{ name: string }>("SELECT name FROM assets WHERE id = ?", id))[0]?.name ?? null;
const jobsOf = (stdout: string) => /\(jobs? ([\d, …]+)[;)]/.exec(stdout)?.[1]?.split(/, (?:… )?/).map(Number) ?? [];

const header = "id,subAreaId,name,status,assetCategoryId,assetTypeId,shapeType,startPoint,endPoint";
const row = (id: string, name = `Asset ${id}`) => `${id},north,${name},ACT,water,pipe,Point,1,2`;

/** What stops a bad file: exit 2, one message on stderr (no stack trace), nothing sent, no progress file left behind. */
async function refused(file: string, extra: string[] = [], resource = "assets") {
  const before = await jobCount();
  const result = await run(file, extra, resource);
  expect({ code: result.code, stdout: result.stdout }).toEqual({ code: 2, stdout: "" });
  expect(result.stderr).toStartWith("importd: ");
  expect(result.stderr).not.toMatch(/^\s+at |node_modules/m);
  expect(await jobCount()).toBe(before);
  expect(existsSync(`${file}.importd-progress`)).toBe(false);
  return result.stderr;
}

describe("the same id twice in a file", () => {
  test("the later record wins, where one request would have failed whole; --validate-only says what the import will do", async () => {
    // The report's repro: the first 1,000 rows, then row 11 again (changed).
    const rows = Array.from({ length: 1000 }, (_, i) => row(`DUP-${i + 1}`));
    const file = write("dup.csv", [header, ...rows, row("DUP-10", "the later DUP-10")].join("\n"));
    const checked = await importd(["import", file, "--resource", "assets", "--validate-only"]);
    expect(checked.code).toBe(0);
    expect(checked.stdout).toContain("line 1002: id 'DUP-10' is also on line 11; the later record wins (it is sent after the earlier one).");
    expect(checked.stdout).toContain("1 record had the id of a record shortly before it: importing sends it in a later request, so the later record wins.");

    const result = await run(file);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("1001 records, 1001 applied, 0 rejected, in 2 jobs");
    expect(result.stdout).toContain("1 record had the id of a record shortly before it and was sent in a later request, so the later record wins.");
    expect(await storedName("DUP-10")).toBe("the later DUP-10");
    for (const id of jobsOf(result.stdout)) {
      const job = await (await fetch(`${server.base}/v2/status/${id}`, { headers: { "api-key": server.key } })).json();
      expect(job.importJobStatus).toBe("Succeeded");
    }
  }, 60_000);

  test("however the file is cut: one id five times in a row and ids repeated across small requests, each ends as its last record", async () => {
    const lines = [header];
    for (let i = 0; i < 200; i++) lines.push(row(`CUT-${i % 37}`, `round ${i}`));
    for (let i = 0; i < 5; i++) lines.push(row("CUT-SAME", `same ${i}`));
    const file = write("cut.csv", lines.join("\n"));
    const result = await run(file, ["--chunk-bytes", "3000"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("205 records, 205 applied, 0 rejected");
    expect(await storedName("CUT-SAME")).toBe("same 4");
    for (let id = 0; id < 37; id++) {
      const last = Math.max(...Array.from({ length: 200 }, (_, i) => i).filter((i) => i % 37 === id));
      expect({ id, name: await storedName(`CUT-${id}`) }).toEqual({ id, name: `round ${last}` });
    }
  }, 60_000);
});

describe("columns and fields the resource does not define", () => {
  test("a misspelled CSV column stops the import before anything is sent, naming the nearest field; --ignore-unknown-columns imports without it", async () => {
    const file = write("misspelled.csv", ["id,subAreaId,name,descripton,status,assetCategoryId,assetTypeId,shapeType,startpoint", "MIS-1,north,Main,the description,ACT,water,pipe,Point,3"].join("\n"));
    const message = await refused(file);
    expect(message).toBe(
      `importd: ${file}: 2 columns are not fields of assets, and would not be imported:\n` +
        "  'descripton' (line 1, column 4): did you mean description?\n" +
        "  'startpoint' (line 1, column 9): did you mean startPoint?\n" +
        "Rename them in the file, or pass --ignore-unknown-columns to import the file without them. Nothing was sent.\n",
    );
    expect(existsSync(join(dir, "misspelled.rejected.csv"))).toBe(false);

    const checked = await importd(["import", file, "--resource", "assets", "--validate-only"]);
    expect(checked.code).toBe(1);
    expect(checked.stdout).toContain("line 1, column 4: 'descripton' is not a field of assets: did you mean description?");
    expect(checked.stdout).toContain("1 record checked in");
    expect(checked.stdout).toContain("2 columns that assets does not define");

    const ignoring = await run(file, ["--ignore-unknown-columns"]);
    expect(ignoring.code).toBe(0);
    expect(ignoring.stderr).toContain("Not importing what assets does not define (--ignore-unknown-columns): 'descripton', 'startpoint'.");
    expect(await storedName("MIS-1")).toBe("Main");
  }, 60_000);

  test("in NDJSON and JSON, fields anywhere in the file are found first, nested ones too, with the line or index of the first", async () => {
    const records = [asset(1), asset(2), { ...asset(3), colour: "red" }, { ...asset(4), geolocation: { ...asset(4).geolocation, locationUnits: "m" } }, { ...asset(5), colour: "blue" }];
    const ndjson = write("fields.ndjson", records.map((record) => JSON.stringify(record)).join("\n"));
    expect(await refused(ndjson)).toBe(
      `importd: ${ndjson}: 2 fields are not fields of assets, and would not be imported:\n` +
        "  'colour' (line 3 and 1 more record)\n" +
        "  'geolocation.locationUnits' (line 4): did you mean geolocation.locationUnit?\n" +
        "Rename them in the file, or pass --ignore-unknown-columns to import the file without them. Nothing was sent.\n",
    );
    const json = write("fields.json", JSON.stringify(records));
    expect(await refused(json)).toContain("  'colour' (index 2 and 1 more record)\n");
    // `_` fields are notes (a rejected file's _error and _line), never unknown.
    const notes = write("notes.ndjson", JSON.stringify({ ...asset(6), _error: "fixed", _line: 9 }));
    expect((await run(notes)).code).toBe(0);
  }, 60_000);
});

describe("delimiters and headers", () => {
  test("';' and tab delimited files are read as such, found from their header; --delimiter overrides", async () => {
    const semi = write("semi.csv", "id;name;description\nSEMI-1;Semi one;with, a comma\n");
    const result = await run(semi, [], "subareas");
    expect(result.code).toBe(0);
    const stored = await (await fetch(`${server.base}/v2/subareas/SEMI-1`, { headers: { "api-key": server.key } })).json();
    expect(stored).toMatchObject({ name: "Semi one", description: "with, a comma" });
    const tab = write("tab.tsv", "id\tname\nTAB-1\tTabbed\n");
    expect((await run(tab, [], "subareas")).code).toBe(0);
    const tabCsv = write("tab.csv", "id\tname\nTAB-2\tTabbed too\n");
    expect((await run(tabCsv, [], "subareas")).code).toBe(0);
    // Told ',' for a ';' file: the header names nothing, and the message says which delimiter would do.
    expect(await refused(semi, ["--delimiter", ","], "subareas")).toBe(
      `importd: ${semi} line 1 names no field of subareas when read with ',', but it does with ';': pass --delimiter ';', or leave --delimiter out.\n`,
    );
  }, 60_000);

  test("the report's `id;name` file for assets: the header lacks required columns, said with the delimiter it was read with, not 'Id must not be empty' on every row", async () => {
    const semi = write("semi-assets.csv", "id;name\nx1;X\n");
    expect(await refused(semi)).toStartWith(
      `importd: ${semi} line 1: the header (read with ';' between cells) has no column for subAreaId, status, assetCategoryId, assetTypeId, shapeType, fields every asset must have, so every row would be rejected.`,
    );
  }, 60_000);

  test("a header that names no field, one that cannot tell its delimiter, one with a column twice, and near misses for required columns", async () => {
    expect(await refused(write("noheader.csv", "A-1,north,Main,ACT,water,pipe,Point\n"))).toContain("line 1 is not a header row of assets: none of its cells names a field");
    expect(await refused(write("tied.csv", "id,name;description\nT,x;y\n"), [], "subareas")).toBe(
      `importd: cannot tell whether ${join(dir, "tied.csv")} is delimited by ',' or ';': its header reads as well with each. Pass --delimiter (',', ';' or tab).\n`,
    );
    expect(await refused(write("twice.csv", "id,name,name\nT,x,y\n"), [], "subareas")).toContain("line 1: the column 'name' appears 2 times (columns 2, 3), and importd cannot tell which to import.");
    expect(await refused(write("near.csv", "ID,Name,SubAreaID,status,assetCategoryId,assetTypeId,shapeType\nN,x,north,ACT,water,pipe,Point\n"))).toContain(
      "has no column for id, subAreaId, name, fields every asset must have, so every row would be rejected. Add the columns (did you mean 'ID' for id? 'SubAreaID' for subAreaId? 'Name' for name?)",
    );
    expect(await refused(write("empty.csv", ""))).toBe(`importd: ${join(dir, "empty.csv")} is empty: importd needs a header row that names the columns, then a row per record.\n`);
  }, 60_000);
});

describe("files that are not what they seem", () => {
  test("a quote that is never closed, a stray quote and text after a closing quote: the line, in one sentence, no library stack trace", async () => {
    const open = write("open.csv", `${header}\nQ-1,north,"Main St,ACT,water,pipe,Point,1,2\n${row("Q-2")}\n`);
    expect(await refused(open)).toBe(`importd: ${open} line 2: a quoted cell starts here and is never closed, so the rest of the file would be read as this one cell. Close its quote, or write a quote inside it twice ("").\n`);
    const stray = write("stray.csv", `${header}\n${row("Q-3")}\nQ-4,north,12" pipe,ACT,water,pipe,Point,1,2\n`);
    expect(await refused(stray)).toStartWith(`importd: ${stray} line 3: a cell holds a quote (") but does not start with one.`);
    const after = write("after.csv", `${header}\nQ-5,north,"12" pipe,ACT,water,pipe,Point,1,2\n`);
    expect(await refused(after)).toStartWith(`importd: ${after} line 2: a quoted cell goes on after its closing quote.`);
    // Quotes where CSV allows them are read as text: a doubled quote, a delimiter and a line break inside.
    const fine = write("quoted.csv", `${header}\nQ-6,north,"12"" pipe, ""old""\nsecond line",ACT,water,pipe,Point,1,2\n`);
    expect((await run(fine)).code).toBe(0);
    expect(await storedName("Q-6")).toBe('12" pipe, "old"\nsecond line');
  }, 60_000);

  test("a binary file named .csv is said to be one in a line, without a flood of bytes on the terminal; so are Windows-1252 and UTF-16 text", async () => {
    const binary = write("binary.csv", new Uint8Array(Array.from({ length: 4096 }, (_, i) => (i * 37) % 256)));
    expect(await refused(binary)).toBe(`importd: ${binary} is not a text file: line 1 holds a NUL byte. importd imports CSV, NDJSON and JSON text in UTF-8; is this the file you meant?\n`);
    const latin = write("latin.csv", Buffer.concat([Buffer.from(`${header}\n${row("L-1")}\nL-2,north,Caf`), Buffer.from([0xe9]), Buffer.from(",ACT,water,pipe,Point,1,2\n")]));
    expect(await refused(latin)).toStartWith(`importd: ${latin} line 3 is not UTF-8 text (byte 0xE9 at byte `);
    const utf16 = write("utf16.csv", Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`${header}\n`, "utf16le")]));
    expect(await refused(utf16)).toStartWith(`importd: ${utf16} is UTF-16 text (as Excel's "Unicode Text" saves it); importd reads UTF-8.`);
    // The same for NDJSON.
    expect(await refused(write("binary.ndjson", new Uint8Array([0x7b, 0, 0x7d, 0x0a])))).toContain("is not a text file: line 1 holds a NUL byte");
  }, 60_000);

  test("the advice for UTF-16 and Windows-1252 files works as given: the converted file keeps a name importd can read, and imports", async () => {
    // Issue 44: `iconv … > utf8-excel-utf16.txt` was suggested, and that file was then refused for its name.
    const follow = async (file: string, extra: string[] = []) => {
      const message = await refused(file, extra);
      const command = /convert it: (iconv .*?)(, and import that with the same --format)?\n$/.exec(message);
      expect(command).not.toBeNull();
      expect(Bun.spawnSync(["sh", "-c", command![1]!]).exitCode).toBe(0);
      const converted = /> (\S+)$/.exec(command![1]!)![1]!;
      return { converted, withFormat: command![2] !== undefined, result: await run(converted, extra) };
    };
    const utf16 = write("excel-utf16.csv", Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`${header}\r\n${row("U16-1")}\r\n`, "utf16le")]));
    const csv = await follow(utf16);
    expect({ converted: csv.converted, withFormat: csv.withFormat, code: csv.result.code }).toEqual({ converted: join(dir, "excel-utf16.utf8.csv"), withFormat: false, code: 0 });
    // Excel's "Unicode Text": tab-delimited UTF-16 named .txt, imported with --format csv, and so is its conversion.
    const tabs = (line: string) => line.replaceAll(",", "\t");
    const text = write("unicode-text.txt", Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`${tabs(header)}\r\n${tabs(row("U16-2"))}\r\n`, "utf16le")]));
    const txt = await follow(text, ["--format", "csv"]);
    expect({ converted: txt.converted, withFormat: txt.withFormat, code: txt.result.code }).toEqual({ converted: join(dir, "unicode-text.utf8.txt"), withFormat: true, code: 0 });
    const latin = write("latin-advice.csv", Buffer.concat([Buffer.from(`${header}\nW-1,north,Caf`), Buffer.from([0xe9]), Buffer.from(",ACT,water,pipe,Point,1,2\n")]));
    const windows = await follow(latin);
    expect({ converted: windows.converted, code: windows.result.code }).toEqual({ converted: join(dir, "latin-advice.utf8.csv"), code: 0 });
    expect(await storedName("W-1")).toBe("Café");
    expect(await storedName("U16-2")).toBe("Asset U16-2");
  }, 60_000);

  test("mixed line endings stop the import at the line where they change; CRLF throughout, with a line break inside a quoted cell, is imported", async () => {
    const mixed = write("mixed.csv", `${header}\r\n${row("MX-1")}\r\n${row("MX-2")}\n${row("MX-3")}\n`);
    expect(await refused(mixed)).toBe(
      `importd: ${mixed} line 3 ends with LF (\\n), but line 1 (the header) ends with CRLF (\\r\\n, Windows): the file mixes line endings (was it put together from two files?). ` +
        `Save it with one kind, for example with dos2unix ${mixed}, and import it again.\n`,
    );
    const crlf = write("crlf.csv", `${header}\r\n${row("CR-1")}\r\nCR-2,north,"two\nlines",ACT,water,pipe,Point,1,2\r\n${row("CR-3")}\r\n`);
    const result = await run(crlf);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("3 records, 3 applied, 0 rejected");
    expect(await storedName("CR-2")).toBe("two\nlines");
    expect(await storedName("CR-3")).toBe("Asset CR-3");
  }, 60_000);

  test("line numbers are a text editor's after a CRLF inside a quoted cell: in messages, in --validate-only and in _line", async () => {
    // Issue 44: each CRLF in a quoted cell counted as two lines, so every later row was said to be further down.
    const lines = [header, 'LN-2,north,"two\r\nlines",ACT,water,pipe,Point,1,2', 'LN-4,north,"three\r\nlines\r\nhere",ACT,water,pipe,Point,1,2', "", "LN-8,no-such-area,Eight,ACT,water,pipe,Point,1,2", "LN-9,north,Nine,ACT,water,pipe,Point"];
    const file = write("editor-lines.csv", `${lines.join("\r\n")}\r\n`);
    const checked = await importd(["import", file, "--resource", "assets", "--validate-only"]);
    expect(checked.stdout).toContain("line 9: this row has 7 cells; the header row has 9");
    const result = await run(file);
    expect(result.stdout).toContain("4 records, 2 applied, 2 rejected");
    const rejected = readFileSync(join(dir, "editor-lines.rejected.csv"), "utf8").split(/\r?\n/);
    expect(rejected[1]).toStartWith("LN-8,no-such-area,");
    expect(rejected[1]).toEndWith(",8");
    expect(rejected[2]).toBe("LN-9,north,Nine,ACT,water,pipe,Point,this row has 7 cells; the header row has 9,9");
  }, 60_000);

  test("--format reads a file whose name does not say what it holds; an unknown extension names --format", async () => {
    const text = write("records.txt", [JSON.stringify(asset(70)), JSON.stringify(asset(71))].join("\n"));
    expect(await refused(text)).toContain("pass --format csv, ndjson or json");
    expect((await run(text, ["--format", "ndjson"])).code).toBe(0);
    const usage = await run(text, ["--format", "xml"]);
    expect(usage).toMatchObject({ code: 2 });
    expect(usage.stderr).toContain("--format must be one of csv, ndjson, json, not 'xml'");
  }, 60_000);
});

describe("the rejected file", () => {
  test("a rejected file the user changed is never replaced or deleted: the next run writes another, and says so", async () => {
    const file = write("fixing.csv", [header, row("FX-1"), "FX-2,nowhere,Two,ACT,water,pipe,Point,1,2", "FX-3,nowhere,Three,ACT,water,pipe,Point,1,2"].join("\n"));
    const rejectedPath = join(dir, "fixing.rejected.csv");
    expect((await run(file)).code).toBe(1);
    // Unchanged, it is importd's own: the next run replaces it.
    const second = await run(file);
    expect(second.stdout).toContain(`are in ${rejectedPath}: fix them there`);
    expect(readdirSync(dir).filter((name) => name.startsWith("fixing.rejected"))).toEqual(["fixing.rejected.csv"]);

    // The user starts fixing it (FX-2 done, FX-3 not yet), then runs the original file again.
    const edited = readFileSync(rejectedPath, "utf8").replace("FX-2,nowhere", "FX-2,north");
    writeFileSync(rejectedPath, edited);
    const third = await run(file);
    expect(third.code).toBe(1);
    const another = join(dir, "fixing.rejected-2.csv");
    expect(third.stdout).toContain(`are in ${another}: fix them there and run the same command on that file. ${rejectedPath} was changed since importd wrote it, so this run left it as it is.`);
    expect(readFileSync(rejectedPath, "utf8")).toBe(edited);
    expect(readFileSync(another, "utf8")).toContain("FX-3,nowhere");

    // Everything applies now: still the edited file is kept, and importd's own second one is removed.
    await importd(["import", write("nowhere.json", JSON.stringify([{ id: "nowhere", name: "Nowhere" }])), "--resource", "subareas", "--base-url", server.base], { IMPORTD_API_KEY: server.key });
    const fourth = await run(file);
    expect(fourth.code).toBe(0);
    expect(fourth.stdout).toContain(`${rejectedPath} was changed since importd wrote it, so this run left it as it is.`);
    expect(readFileSync(rejectedPath, "utf8")).toBe(edited);
    expect(existsSync(another)).toBe(false);
  }, 60_000);

  test("a row with a cell too many or too few comes back exactly as it was; fixed there, the rejected file imports, its _error and _line never read as data", async () => {
    // Issue 44's report: an unquoted "Main St, east" makes 10 cells under 9 columns; the last cell was lost.
    const file = write("shapes.csv", [header, "SH-1,north,Main St, east,ACT,water,pipe,Point,1,2", "SH-2,north,Short,ACT,water,pipe,Point", row("SH-3")].join("\n") + "\n");
    const first = await run(file);
    expect(first.code).toBe(1);
    expect(first.stdout).toContain("3 records, 1 applied, 2 rejected");
    const rejectedPath = join(dir, "shapes.rejected.csv");
    const rejected = readFileSync(rejectedPath, "utf8");
    expect(rejected).toBe(
      `${header},_error,_line\n` +
        "SH-1,north,Main St, east,ACT,water,pipe,Point,1,2,this row has 10 cells; the header row has 9,2\n" +
        "SH-2,north,Short,ACT,water,pipe,Point,this row has 7 cells; the header row has 9,3\n",
    );

    // Imported again unchanged: the same two rows, for the same reasons (the notes are not counted as cells), and
    // the next rejected file holds each row once more as it was, without the old _error as data.
    const again = await run(rejectedPath);
    expect(again.stdout).toContain("2 records, 0 applied, 2 rejected");
    const next = readFileSync(join(dir, "shapes.rejected.rejected.csv"), "utf8");
    expect(next).toBe(
      `${header},_error,_line\n` +
        "SH-1,north,Main St, east,ACT,water,pipe,Point,1,2,this row has 10 cells; the header row has 9 besides _error and _line,2\n" +
        "SH-2,north,Short,ACT,water,pipe,Point,this row has 7 cells; the header row has 9 besides _error and _line,3\n",
    );

    // Fixed as a person would: the name quoted, the missing cells added.
    writeFileSync(rejectedPath, rejected.replace("Main St, east", '"Main St, east"').replace("Point,this row has 7", "Point,1,2,this row has 7"));
    const fixed = await run(rejectedPath);
    expect({ code: fixed.code, stdout: fixed.stdout }).toMatchObject({ code: 0, stdout: expect.stringContaining("2 records, 2 applied, 0 rejected") });
    expect(await storedName("SH-1")).toBe("Main St, east");
    expect(await storedName("SH-2")).toBe("Short");
  }, 60_000);

  test("the rejected file is written in the input's dialect: ';', CRLF and a byte order mark, or every cell quoted", async () => {
    // Issue 44: a European Excel's file came back ','-delimited with LF and no BOM, and opened there as one column.
    const semi = (text: string) => text.replaceAll(",", ";");
    const file = write("excel.csv", `\uFEFF${semi(header)}\r\n${semi(row("XL-1"))}\r\nXL-2;no-such-area;"Two\nlines; here";ACT;water;pipe;Point;1;2\r\n`);
    const result = await run(file);
    expect(result.stdout).toContain("2 records, 1 applied, 1 rejected");
    const rejectedPath = join(dir, "excel.rejected.csv");
    expect(readFileSync(rejectedPath, "utf8")).toBe(
      `\uFEFF${semi(header)};_error;_line\r\n` +
        `XL-2;no-such-area;"Two\nlines; here";ACT;water;pipe;Point;1;2;'Sub Area Id' 'no-such-area' does not exist in this environment. Import it first with POST /v2/subareas, or correct the subAreaId.;3\r\n`,
    );
    writeFileSync(rejectedPath, readFileSync(rejectedPath, "utf8").replace(";no-such-area;", ";north;"));
    const fixed = await run(rejectedPath);
    expect({ code: fixed.code, stdout: fixed.stdout }).toMatchObject({ code: 0, stdout: expect.stringContaining("1 record, 1 applied, 0 rejected") });
    expect(await storedName("XL-2")).toBe("Two\nlines; here");

    const quote = (line: string) => line.split(",").map((cell) => `"${cell}"`).join(",");
    const allQuoted = write("quoted-all.csv", `${quote(header)}\n${quote("QA-1,no-such-area,One,ACT,water,pipe,Point,1,2")}\n`);
    expect((await run(allQuoted)).stdout).toContain("1 record, 0 applied, 1 rejected");
    expect(readFileSync(join(dir, "quoted-all.rejected.csv"), "utf8")).toStartWith(`${quote(`${header},_error,_line`)}\n${quote("QA-1,no-such-area,One,ACT,water,pipe,Point,1,2")},"'Sub Area Id'`);
  }, 60_000);

  test("an unreadable JSON element comes back as it was after a note, and once fixed there it is imported", async () => {
    const file = write("broken.json", `[${JSON.stringify(asset(80))},\n{"id": "A-0000081", "name": oops},\n${JSON.stringify(asset(82))}]`);
    const result = await run(file);
    expect(result.code).toBe(1);
    const rejectedPath = join(dir, "broken.rejected.json");
    const text = readFileSync(rejectedPath, "utf8");
    expect(text).toContain('{"id": "A-0000081", "name": oops}');
    writeFileSync(rejectedPath, text.replace('{"id": "A-0000081", "name": oops}', JSON.stringify(asset(81))));
    const fixed = await run(rejectedPath);
    expect(fixed.stdout).toContain("1 record, 1 applied, 0 rejected");
    expect(await storedName("A-0000081")).not.toBeNull();
  }, 60_000);
});

describe("a messy real-world CSV, round trip (issue 44's done-when)", () => {
  test("';', CRLF, a BOM, multi-line cells, a stray cell, a decimal comma and an id twice: imported, the rejected file fixed with sed, imported again, exit 0, every count and line exact", async () => {
    const lines = [
      "\uFEFFid;subAreaId;name;status;assetCategoryId;assetTypeId;shapeType;startPoint;endPoint",
      'RT-1;north;"Pipe\r\nwith two lines";ACT;water;pipe;Point;1;2', // lines 2-3
      "RT-2;north;Main St; east;ACT;water;pipe;Point;1;2", // 4: a stray cell
      "RT-3;north;Comma;ACT;water;pipe;Point;12,5;20", // 5: a decimal comma
      'RT-4;no-such-area;"Valve\r\nnorth\r\nside";ACT;water;pipe;Point;1;2', // lines 6-8: rejected by the server
      'RT-1;north;"Pipe, renamed";ACT;water;pipe;Point;1;2', // 9: the same id again, which wins
      "RT-5;south;Five;ACT;water;pipe;Point;3;4", // 10
    ];
    const file = write("messy.csv", `${lines.join("\r\n")}\r\n`);
    const checked = await importd(["import", file, "--resource", "assets", "--validate-only"]);
    expect(checked.stdout).toContain("line 4: this row has 10 cells; the header row has 9\n");
    expect(checked.stdout).toContain("line 5: the startPoint cell is '12,5', which is not a number: a decimal comma, most likely.");
    expect(checked.stdout).toContain("line 9: id 'RT-1' is also on line 2; the later record wins (it is sent after the earlier one).\n");

    const first = await run(file);
    expect(first.code).toBe(1);
    expect(first.stdout).toContain(`${file}: 6 records, 3 applied, 3 rejected`);
    expect(first.stdout).toContain("1 record had the id of a record shortly before it and was sent in a later request, so the later record wins.");
    const rejectedPath = join(dir, "messy.rejected.csv");
    const decimalComma = "the startPoint cell is '12,5', which is not a number: a decimal comma, most likely. importd reads numbers with a decimal point: write 12.5 (a spreadsheet saves it so when its decimal separator is '.').";
    const noSuchArea = "'Sub Area Id' 'no-such-area' does not exist in this environment. Import it first with POST /v2/subareas, or correct the subAreaId.";
    expect(readFileSync(rejectedPath, "utf8")).toBe(
      [
        "\uFEFFid;subAreaId;name;status;assetCategoryId;assetTypeId;shapeType;startPoint;endPoint;_error;_line",
        'RT-2;north;Main St; east;ACT;water;pipe;Point;1;2;"this row has 10 cells; the header row has 9";4',
        `RT-3;north;Comma;ACT;water;pipe;Point;12,5;20;${decimalComma};5`,
        `RT-4;no-such-area;"Valve\r\nnorth\r\nside";ACT;water;pipe;Point;1;2;${noSuchArea};6`,
        "",
      ].join("\r\n"),
    );

    // Fixed as a person would, with sed: the stray cell quoted, the decimal comma a point, the sub-area corrected.
    const sed = Bun.spawnSync(["sed", "-i", "-e", 's/;Main St; east;/;"Main St; east";/', "-e", "s/;12,5;/;12.5;/", "-e", "s/;no-such-area;/;north;/", rejectedPath]);
    expect(sed.exitCode).toBe(0);
    const second = await run(rejectedPath);
    expect({ code: second.code, stdout: second.stdout }).toMatchObject({ code: 0, stdout: expect.stringContaining(`${rejectedPath}: 3 records, 3 applied, 0 rejected`) });
    expect(existsSync(join(dir, "messy.rejected.rejected.csv"))).toBe(false);
    expect(await storedName("RT-1")).toBe("Pipe, renamed");
    expect(await storedName("RT-2")).toBe("Main St; east");
    expect(await storedName("RT-4")).toBe("Valve\r\nnorth\r\nside");
    expect(await storedName("RT-5")).toBe("Five");
    const [stored] = await server.query<{ start_point: number }>("SELECT start_point FROM assets WHERE id = ?", "RT-3");
    expect(Number(stored!.start_point)).toBe(12.5);
  }, 60_000);
});

describe("runs that fail leave nothing to resume", () => {
  test("a refused key or a broken file leaves no progress file, so the next run has no 'interrupted import' note", async () => {
    const file = write("stale.csv", [header, row("ST-1")].join("\n"));
    const wrongKey = await importd(["import", file, "--resource", "assets", "--base-url", server.base], { IMPORTD_API_KEY: "wrong_1" });
    expect(wrongKey.code).toBe(2);
    expect(existsSync(`${file}.importd-progress`)).toBe(false);
    const next = await run(file);
    expect(next.code).toBe(0);
    expect(next.stderr).not.toContain("interrupted");
  }, 60_000);
});

test("the summary names its jobs, and says '1 record'", async () => {
  const file = write("one.ndjson", JSON.stringify(asset(90)));
  const result = await run(file);
  const [id] = jobsOf(result.stdout);
  expect(result.stdout).toContain(`${file}: 1 record, 1 applied, 0 rejected, in 1 job and `);
  expect(result.stdout).toContain(` s (job ${id}).`);
  const job = await (await fetch(`${server.base}/v2/status/${id}`, { headers: { "api-key": server.key } })).json();
  expect(job).toMatchObject({ importJobStatus: "Succeeded", recordCount: 1 });
}, 60_000);

test("on a terminal (a pty, 80 columns): a binary file is one short line, and an import ends with its summary after the progress line", async () => {
  const inPty = async (args: string[]) => {
    const command = ["stty cols 80 rows 24;", ...importdCommand, ...args].map((part) => (part.endsWith(";") ? part : `'${part}'`)).join(" ");
    const proc = Bun.spawn(["script", "-qfec", command, "/dev/null"], { cwd: projectRoot, env: { ...process.env, IMPORTD_API_KEY: server.key }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
    return { out, code };
  };
  const binary = write("tty-binary.csv", new Uint8Array(Array.from({ length: 65536 }, (_, i) => (i * 131) % 256)));
  const refusedThere = await inPty(["import", binary, "--resource", "assets", "--base-url", server.base]);
  expect(refusedThere.code).toBe(2);
  // What the screen shows: the message, and nothing of the file's bytes.
  expect(refusedThere.out).toContain("is not a text file");
  expect(refusedThere.out.length).toBeLessThan(400);
  expect(refusedThere.out).not.toMatch(/[\u0000-\u0008\u000e-\u001a\u001c-\u001f]/);

  const file = write("tty.csv", [header, ...Array.from({ length: 50 }, (_, i) => row(`TTY-${i}`))].join("\n"));
  const imported = await inPty(["import", file, "--resource", "assets", "--base-url", server.base]);
  expect(imported.code).toBe(0);
  const screenLines = imported.out.split(/\r?\n/).map((line) => line.split("\r").at(-1)!.replace(/\x1b\[2K/g, ""));
  expect(screenLines.find((line) => line.startsWith(file))).toMatch(/: 50 records, 50 applied, 0 rejected, in 1 job and [\d.]+ s \(job \d+\)\.$/);
  // Every line the progress drew fits the 80 columns.
  for (const drawn of imported.out.split(/\r|\n/).map((line) => line.replace(/\x1b\[2K/g, ""))) if (!drawn.startsWith(file)) expect(drawn.length).toBeLessThanOrEqual(80);
}, 60_000);
