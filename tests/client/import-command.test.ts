import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { importd, projectRoot, importdCommand } from "../helpers/process";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";
import { until } from "../helpers/until";
import { notOverHttps } from "../helpers/backend";

let server: TestServer;
const dir = tempDir("importd-import-");
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const run = (file: string, extra: string[] = [], env: Record<string, string> = { IMPORTD_API_KEY: server.key }) =>
  importd(["import", file, "--resource", "assets", "--base-url", server.base, ...extra], env);
const write = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const jobCount = async () => Number((await server.query<{ n: number }>("SELECT count(*) AS n FROM jobs"))[0]!.n);
const stored = async (id: string) => (await server.query('SELECT name, start_point AS "startPoint", location_start AS "locationStart" FROM assets WHERE id = ?', id))[0] ?? null;

const header = "id,subAreaId,name,status,assetCategoryId,assetTypeId,shapeType,startPoint,endPoint,geolocation.linearReferenceStart,geolocation.linearReferenceEnd,geolocation.locationStart,geolocation.locationEnd,geolocation.locationUnit";

describe("importd import", () => {
  test("--dry-run: importd checks the file against the environment's data and says what importing would do; nothing is applied, the would-be rejected records are written", async () => {
    await run(write("dry-existing.json", JSON.stringify([asset(900)])));
    const records = [asset(900), asset(901), asset(902, { subAreaId: "nowhere" })];
    const file = write("dry.json", JSON.stringify(records));
    const dry = await run(file, ["--dry-run"]);
    expect(dry.code).toBe(1);
    expect(dry.stdout).toContain(`${file}: dry run, nothing was applied. 3 records: 2 would be applied (1 created, 0 updated, 1 unchanged), 1 rejected, in 1 job and`);
    const rejectedPath = file.replace(/\.json$/, ".rejected.json");
    expect(dry.stdout).toContain(`are in ${rejectedPath}.`);
    const rejected = JSON.parse(readFileSync(rejectedPath, "utf8"));
    expect(rejected).toHaveLength(1);
    expect(rejected[0]).toMatchObject({ id: "A-0000902", _index: 2 });
    expect(await stored("A-0000901")).toBeNull();
    expect(existsSync(`${file}.importd-progress`)).toBe(false);

    // The real import afterwards is not taken for a replay of the dry run.
    const real = await run(file);
    expect(real.code).toBe(1);
    expect(real.stdout).toContain("3 records, 2 applied, 1 rejected");
    expect(await stored("A-0000901")).not.toBeNull();

    const both = await run(file, ["--dry-run", "--validate-only"]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("--validate-only and --dry-run do not go together");
  }, 60_000);

  test("CSV: dotted headers nest, numbers become numbers, empty cells are absent; rejected rows come back as CSV with _error and _line, and the fixed file imports", async () => {
    const file = write(
      "assets.csv",
      [
        header,
        `CSV-1,north,"Main St, east",ACT,water,pipe,LineString,0,10.5,MAIN,MAIN,0,10.5,m`,
        "CSV-2,west,Elm St,ACT,water,pipe,LineString,,,,,,,",
        "CSV-3,north,,ACT,water,pipe,Point,,,,,,,",
        "CSV-4,north,Oak,ACT,water,pipe,Point",
        `CSV-5,south,"Ash ""the old""",ACT,water,pipe,Point,5,1,,,,,`,
      ].join("\n"),
    );
    const first = await run(file);
    expect(first.code).toBe(1);
    expect(first.stdout).toContain("5 records, 1 applied, 4 rejected, in 1 job");
    expect(await stored("CSV-1")).toEqual({ name: "Main St, east", startPoint: 0, locationStart: 0 });

    const rejectedPath = join(dir, "assets.rejected.csv");
    const lines = readFileSync(rejectedPath, "utf8").trim().split("\n");
    expect(lines[0]).toBe(`${header},_error,_line`);
    const byId = new Map(lines.slice(1).map((line) => [line.slice(0, 5), line]));
    expect(byId.get("CSV-2")).toEndWith(`"'Sub Area Id' 'west' does not exist in this environment. Import it first with POST /v2/subareas, or correct the subAreaId.",3`);
    expect(byId.get("CSV-3")).toEndWith(",'Name' must not be empty.,4");
    // A short row comes back as it was (not padded): what the person wrote, to complete.
    expect(byId.get("CSV-4")).toBe("CSV-4,north,Oak,ACT,water,pipe,Point,this row has 7 cells; the header row has 14,5");
    expect(byId.get("CSV-5")).toStartWith(`CSV-5,south,"Ash ""the old""",`);
    expect(byId.get("CSV-5")).toEndWith(",'Start Point' must be less than or equal to 'End Point'.,6");

    const fixed = readFileSync(rejectedPath, "utf8")
      .replace("CSV-2,west", "CSV-2,south")
      .replace("CSV-3,north,,", "CSV-3,north,Pine,")
      .replace("CSV-4,north,Oak,ACT,water,pipe,Point,", "CSV-4,north,Oak,ACT,water,pipe,Point,2,,,,,,,")
      .replace(",Point,5,1,", ",Point,1,5,");
    writeFileSync(rejectedPath, fixed);
    const second = await run(rejectedPath);
    expect({ code: second.code, stdout: second.stdout }).toMatchObject({ code: 0 });
    expect(second.stdout).toContain("4 records, 4 applied, 0 rejected");
    expect(await stored("CSV-4")).toMatchObject({ startPoint: 2 });
    expect(await stored("CSV-5")).toMatchObject({ name: 'Ash "the old"' });
  }, 60_000);

  notOverHttps("CSV: a number cell that is not a number is said in a spreadsheet's words, with its value and the fix, before anything is sent", async () => {
    // Issue 44: `12,5` got "'Start Point' must be a number. You sent a string." A person sent a cell, not a string.
    const file = write("decimal-comma.csv", [header, "DC-1,north,Comma,ACT,water,pipe,LineString,\"12,5\",20,,,,,", "DC-2,north,Two,ACT,water,pipe,LineString,1,2,MAIN,MAIN,ten,2,m"].join("\n"));
    const checked = await importd(["import", file, "--resource", "assets", "--validate-only"]);
    expect(checked.stdout).toContain(
      "line 2: the startPoint cell is '12,5', which is not a number: a decimal comma, most likely. importd reads numbers with a decimal point: write 12.5 (a spreadsheet saves it so when its decimal separator is '.').\n",
    );
    expect(checked.stdout).toContain("line 3: the geolocation.locationStart cell is 'ten', which is not a number: write a number, such as 12.5, or leave the cell empty.\n");
    const result = await run(file);
    expect(result.stdout).toContain("2 records, 0 applied, 2 rejected");
    expect(result.stdout).not.toContain("You sent");
    const rejected = readFileSync(join(dir, "decimal-comma.rejected.csv"), "utf8");
    expect(rejected).toContain(`DC-1,north,Comma,ACT,water,pipe,LineString,"12,5",20,,,,,,"the startPoint cell is '12,5', which is not a number: a decimal comma`);
    writeFileSync(file, readFileSync(file, "utf8").replace('"12,5"', "12.5").replace(",ten,", ",1,"));
    const fixed = await run(file);
    expect({ code: fixed.code, stdout: fixed.stdout }).toMatchObject({ code: 0, stdout: expect.stringContaining("2 records, 2 applied, 0 rejected") });
    expect(await stored("DC-1")).toMatchObject({ startPoint: 12.5 });
    expect(await stored("DC-2")).toMatchObject({ locationStart: 1 });
  }, 60_000);

  notOverHttps("NDJSON and JSON arrays, with the rejected records written back in the same format", async () => {
    const ndjson = write("batch.ndjson", `${JSON.stringify(asset(1))}\n\n${JSON.stringify({ ...asset(2), assetTypeId: "nothing" })}\nnot json\n`);
    const nd = await run(ndjson);
    expect(nd.code).toBe(1);
    // A line that is not JSON comes back as it was, after a note that says why, so that it can be fixed there.
    const ndLines = readFileSync(join(dir, "batch.rejected.ndjson"), "utf8").trim().split("\n");
    expect(ndLines).toHaveLength(3);
    const ndRejected = ndLines.slice(0, 2).map((line) => JSON.parse(line));
    expect(ndRejected.map((entry) => entry._line)).toEqual([3, 4]);
    expect(ndRejected[0]).toMatchObject({ id: asset(2).id, _error: expect.stringContaining("'Asset Type Id' 'nothing'") });
    expect(ndRejected[1]).toEqual({ _error: expect.stringMatching(/^this line is not valid JSON .*\. It follows as it was: fix it there\.$/), _line: 4 });
    expect(ndLines[2]).toBe("not json");

    const json = write("batch.json", JSON.stringify([asset(3), { ...asset(4), shapeType: "Line" }, 7]));
    const js = await run(json);
    expect(js.code).toBe(1);
    const jsRejected = JSON.parse(readFileSync(join(dir, "batch.rejected.json"), "utf8")) as Array<Record<string, unknown>>;
    expect(jsRejected.map((entry) => entry._index).sort()).toEqual([1, 2]);
    expect(jsRejected.find((entry) => entry._index === 1)).toMatchObject({ id: asset(4).id, shapeType: "Line", _error: expect.stringContaining("'Shape Type' must be one of") });
  }, 60_000);

  test("splits a file into requests under --chunk-bytes, in order, so a later record wins over an earlier one with the same id", async () => {
    const records = [...Array.from({ length: 300 }, (_, i) => asset(1000 + i)), { ...asset(1000), name: "the later one" }];
    const file = write("ordered.ndjson", records.map((record) => JSON.stringify(record)).join("\n"));
    const before = (await jobCount());
    const result = await run(file, ["--chunk-bytes", "20000"]);
    expect(result.code).toBe(0);
    const jobs = (await jobCount()) - before;
    expect(jobs).toBeGreaterThan(3);
    expect(result.stdout).toContain(`301 records, 301 applied, 0 rejected, in ${jobs} jobs`);
    expect(await stored(asset(1000).id as string)).toMatchObject({ name: "the later one" });
    // Plain progress lines when not on a terminal, one per request.
    expect(result.stderr.trim().split("\n").filter((line) => line.includes("records sent"))).toHaveLength(jobs);
  }, 60_000);

  test("an import interrupted with Ctrl-C says how to go on, exits 130, and resumes where it stopped, applying no request twice", async () => {
    const file = write("resume.ndjson", Array.from({ length: 2000 }, (_, i) => JSON.stringify(asset(5000 + i))).join("\n"));
    const before = (await jobCount());
    const proc = Bun.spawn([...importdCommand, "import", file, "--resource", "assets", "--base-url", server.base, "--chunk-bytes", "40000"], {
      cwd: projectRoot,
      env: { ...process.env, IMPORTD_API_KEY: server.key },
      stdout: "pipe",
      stderr: "pipe",
    });
    // Ctrl-C once a few requests have gone through: it says how to go on, and exits 130 (128 + SIGINT), as shells expect.
    await until(async () => (await jobCount()) - before >= 3, { what: "3 of the import's requests accepted", deadlineMs: 30_000, everyMs: 10 });
    proc.kill("SIGINT");
    expect(await proc.exited).toBe(130);
    expect(await new Response(proc.stderr).text()).toContain("importd: interrupted. Run the same command again to resume where it stopped");
    const partial = (await jobCount()) - before;
    expect(partial).toBeGreaterThanOrEqual(3);

    const resumed = await run(file, ["--chunk-bytes", "40000"]);
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toContain("2000 records, 2000 applied, 0 rejected");
    const chunks = Number(/in (\d+) jobs/.exec(resumed.stdout)![1]);
    // Every chunk is one job: those sent before the interruption were answered again, not queued again.
    expect((await jobCount()) - before).toBe(chunks);
    expect(partial).toBeLessThan(chunks);
    // It says so: which jobs were the interrupted run's, and that it resumed.
    expect(resumed.stdout).toMatch(/(\d+) of the \d+ jobs had been queued by the interrupted run started \S+ and were not sent again/);
    expect(Number(/(\d+) of the \d+ jobs had been queued/.exec(resumed.stdout)![1])).toBeGreaterThanOrEqual(partial);
    expect(resumed.stderr).toContain("Resuming the import of");
    // Finished: its journal is gone, so the next run is a new import.
    expect(existsSync(`${file}.importd-progress`)).toBe(false);
  }, 120_000);

  notOverHttps("--restart does not resume an interrupted import: every request is sent again as a new job", async () => {
    const file = write("restart.ndjson", Array.from({ length: 300 }, (_, i) => JSON.stringify(asset(9000 + i))).join("\n"));
    // An interrupted run's journal: two chunks went through.
    const first = await run(file, ["--chunk-bytes", "40000"]);
    expect(first.code).toBe(0);
    const jobsOfFirst = Number(/in (\d+) jobs/.exec(first.stdout)![1]);
    const stat = statSync(file);
    writeFileSync(
      `${file}.importd-progress`,
      `${JSON.stringify({ resource: "assets", baseUrl: server.base, fileBytes: stat.size, fileModifiedMs: stat.mtimeMs, runId: "0123456789abcdef", startedAt: "2026-11-22T10:00:00.000Z", chunkBytes: 40000 })}\n`,
    );
    const before = (await jobCount());
    const restarted = await run(file, ["--chunk-bytes", "40000", "--restart"]);
    expect(restarted.code).toBe(0);
    expect(restarted.stderr).toContain("--restart: the import of this file interrupted on 2026-11-22T10:00:00.000Z is not resumed");
    expect((await jobCount()) - before).toBe(jobsOfFirst);
    expect(restarted.stdout).not.toContain("interrupted run");
  }, 60_000);

  notOverHttps("running a finished import again sends it again: rows rejected for missing reference data are applied once it exists", async () => {
    const env = await server.addEnvironment("rerun");
    const rows = [
      "RR-1,north,Main St,ACT,water,pipe,Point,,,,,,,",
      "RR-2,west,Elm St,ACT,water,pipe,Point,,,,,,,",
      "RR-3,west,Oak Ave,ACT,water,pipe,Point,,,,,,,",
      "RR-4,north,Gas main,ACT,gas,pipe,LineString,,,,,,,",
      "RR-5,west,Gas valve,ACT,gas,valve,Point,,,,,,,",
      "RR-6,south,Ash St,ACT,gas,pipe,Point,,,,,,,",
      "RR-7,south,Birch Rd,ACT,water,valve,Point,,,,,,,",
    ];
    const file = write("rerun.csv", [header, ...rows].join("\n"));
    const again = () => importd(["import", file, "--resource", "assets", "--base-url", env.base], { IMPORTD_API_KEY: env.key });
    const reference = (resource: string, records: unknown[]) =>
      importd(["import", write(`${resource}-${Date.now()}.json`, JSON.stringify(records)), "--resource", resource, "--base-url", env.base], { IMPORTD_API_KEY: env.key });
    for (const [resource, records] of [["subareas", [{ id: "north", name: "North" }, { id: "south", name: "South" }]], ["assettypes", [{ id: "pipe", name: "Pipe" }, { id: "valve", name: "Valve" }]], ["assetcategories", [{ id: "water", name: "Water" }]]] as const) {
      expect((await reference(resource, [...records])).code).toBe(0);
    }

    const first = await again();
    expect(first.code).toBe(1);
    expect(first.stdout).toContain("7 records, 2 applied, 5 rejected, in 1 job");
    expect(readFileSync(join(dir, "rerun.rejected.csv"), "utf8")).toContain("'Sub Area Id' 'west' does not exist");
    expect(existsSync(`${file}.importd-progress`)).toBe(false);

    // What the message says to do: import the missing reference data, then run the same command.
    expect((await reference("subareas", [{ id: "west", name: "West" }])).code).toBe(0);
    expect((await reference("assetcategories", [{ id: "gas", name: "Gas" }])).code).toBe(0);
    const jobsBefore = (await jobCount());
    const second = await again();
    expect({ code: second.code, stdout: second.stdout }).toMatchObject({ code: 0 });
    expect(second.stdout).toContain("7 records, 7 applied, 0 rejected, in 1 job");
    expect(second.stdout).not.toContain("interrupted run");
    expect((await jobCount()) - jobsBefore).toBe(1);
    // The five rows the first run rejected are applied now.
    for (const id of ["RR-2", "RR-3", "RR-4", "RR-5", "RR-6"]) {
      const response = await fetch(`${env.base}/v2/assets/${id}`, { headers: { "api-key": env.key } });
      expect({ id, status: response.status }).toEqual({ id, status: 200 });
    }
    // Nothing rejected this time: no rejected file claiming 'west' does not exist.
    expect(existsSync(join(dir, "rerun.rejected.csv"))).toBe(false);
  }, 120_000);

  notOverHttps("counts add up: read = applied + rejected, and a row refused here before sending is rejected but not sent", async () => {
    const file = write("counts.csv", [header, "CT-1,north,Ok,ACT,water,pipe,Point,,,,,,,", "CT-2,north,Short row", "CT-3,west,Elm,ACT,water,pipe,Point,,,,,,,"].join("\n"));
    const result = await run(file);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain("3 records, 1 applied, 2 rejected, in 1 job and ");
    expect(result.stdout).toMatch(/ s \(job \d+; 2 sent, 1 could not be read and was not sent\)\./);
    // The plain progress line (not a terminal) has every count.
    expect(result.stderr).toContain("3 records read, 2 records sent, 1 applied, 2 rejected (1 before sending)");
  }, 60_000);

  notOverHttps("the rejected file is in the input's line order, across chunks and kinds of rejection", async () => {
    const lines = Array.from({ length: 120 }, (_, i) => {
      const n = 7000 + i;
      if (i % 10 === 3) return "not json"; // unreadable: rejected here
      if (i % 10 === 5) return JSON.stringify({ ...asset(n), name: "" }); // refused at request time (400)
      if (i % 10 === 7) return JSON.stringify({ ...asset(n), subAreaId: "nowhere" }); // rejected by the job
      return JSON.stringify(asset(n));
    });
    const file = write("order.ndjson", lines.join("\n"));
    const result = await run(file, ["--chunk-bytes", "8000"]);
    expect(result.code).toBe(1);
    expect(Number(/in (\d+) jobs/.exec(result.stdout)![1])).toBeGreaterThan(3);
    // Each unreadable line is a note, then the line as it was: the notes say where each stood.
    const written = readFileSync(join(dir, "order.rejected.ndjson"), "utf8").trim().split("\n").filter((line) => line !== "not json").map((line) => JSON.parse(line)._line as number);
    const expected = lines.flatMap((_, i) => ([3, 5, 7].includes(i % 10) ? [i + 1] : []));
    expect(written).toEqual(expected);
  }, 60_000);

  notOverHttps("--validate-only checks the whole file locally, prints every problem with its line, and sends nothing", async () => {
    const file = write("check.csv", [header, "V-1,north,Ok,ACT,water,pipe,Point,,,,,,,", "V-2,north,,ACT,water,pipe,Circle,,,,,,,", "V-3,north,Ok,ACT,water,pipe,Point,9,1,,,,,"].join("\n"));
    const requests = server.logs.filter((entry) => entry.msg === "request").length;
    const result = await importd(["import", file, "--resource", "assets", "--validate-only"]);
    expect(result.code).toBe(1);
    expect(result.stdout.trim().split("\n")).toEqual([
      "line 3: name: 'Name' must not be empty.",
      "line 3: shapeType: 'Shape Type' must be one of: Point, MultiPoint, LineString, MultiLineString, Polygon, MultiPolygon. You entered 'Circle'.",
      "line 4: startPoint: 'Start Point' must be less than or equal to 'End Point'.",
      // Records with problems, not problems (V-2 has two); and what a local check cannot know.
      `${file}: 3 records checked in ${/in ([\d.]+) s/.exec(result.stdout)![1]} s, 2 with problems. Nothing was sent. ` +
        "References (subAreaId, assetTypeId, assetCategoryId) were not checked: whether they exist is checked against the environment's data when the job runs.",
    ]);
    expect(server.logs.filter((entry) => entry.msg === "request").length).toBe(requests);
    expect(existsSync(join(dir, "check.rejected.csv"))).toBe(false);
    expect((await importd(["import", write("clean.csv", [header, "V-4,north,Ok,ACT,water,pipe,Point,,,,,,,"].join("\n")), "--resource", "assets", "--validate-only"])).code).toBe(0);
  }, 60_000);

  notOverHttps("--validate-only finds the NUL character, which the server refuses too", async () => {
    const file = write("nul.ndjson", [asset(1), asset(2, { name: "Main\u0000St" })].map((record) => JSON.stringify(record)).join("\n"));
    const result = await importd(["import", file, "--resource", "assets", "--validate-only"]);
    expect(result.code).toBe(1);
    expect(result.stdout.split("\n")[0]).toBe("line 2: name: 'Name' must not contain the NUL character (\\u0000). Remove it and send the batch again.");
  }, 60_000);

  test("usage and connection errors are one line and exit 2", async () => {
    const file = write("one.ndjson", JSON.stringify(asset(1)));
    const cases: Array<[string[], Record<string, string>, string]> = [
      [["import", "--resource", "assets", "--base-url", server.base], { IMPORTD_API_KEY: server.key }, "import takes one file, got none"],
      [["import", file, "--resource", "pipes", "--base-url", server.base], { IMPORTD_API_KEY: server.key }, "--resource must be one of subareas, assettypes, assetcategories, assets, not 'pipes'"],
      [["import", file, "--resource", "assets", "--base-url", server.base], {}, "no API key: pass --api-key or set IMPORTD_API_KEY"],
      [["import", file, "--resource", "assets", "--base-url", "localhost:8080"], { IMPORTD_API_KEY: server.key }, "--base-url must be an environment's base URL"],
      [["import", join(dir, "missing.csv"), "--resource", "assets", "--base-url", server.base], { IMPORTD_API_KEY: server.key }, "no such file"],
      [["import", join(dir, "data.txt"), "--resource", "assets", "--base-url", server.base], { IMPORTD_API_KEY: server.key }, "cannot tell the format"],
      [["import", file, "--resource", "assets", "--base-url", "http://127.0.0.1:9/default"], { IMPORTD_API_KEY: server.key }, "cannot reach importd at http://127.0.0.1:9/default"],
      [["import", file, "--resource", "assets", "--base-url", server.base], { IMPORTD_API_KEY: "wrong_1" }, "the server refused the API key (401): the key is wrong or revoked, or there is no environment 'default'"],
      // A misspelled environment gets the same 401 (the server does not tell which exist): the message names both causes.
      [["import", file, "--resource", "assets", "--base-url", server.base.replace(/default$/, "defualt")], { IMPORTD_API_KEY: server.key }, "or there is no environment 'defualt' (the end of --base-url)"],
    ];
    writeFileSync(join(dir, "data.txt"), "x");
    for (const [args, env, message] of cases) {
      const result = await importd(args, env);
      expect({ args, code: result.code }).toEqual({ args, code: 2 });
      expect(result.stderr).toContain(message);
      expect(result.stderr).not.toMatch(/^\s+at /m);
    }
  }, 120_000);
});
