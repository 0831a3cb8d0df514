import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { jobStatuses } from "../../src/domain/job";
import { jobTypes } from "../../src/resources/registry";
import { heldPolls, importAndWait, importBatch, type JobDocument } from "../helpers/api";
import { importd } from "../helpers/process";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";

// `importd jobs` (DECISIONS 12, "Jobs from the shell"): the real command against a real server.

let server: TestServer;
const dir = tempDir("importd-jobs-");
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

type Environment = { base: string; key: string };
const jobs = (environment: Environment, ...args: string[]) => importd(["jobs", ...args, "--base-url", environment.base], { IMPORTD_API_KEY: environment.key });
const defaultEnvironment = () => ({ base: server.base, key: server.key });
const idsIn = (table: string) => table.trim().split("\n").slice(1).filter((line) => /^\s*\d/.test(line)).map((line) => Number(line.trim().split(/\s+/)[0]));

/** An environment of its own with its reference data, then one job of each outcome, oldest first. */
async function environmentWithJobs(slug: string) {
  const environment = await server.addEnvironment(slug);
  await seedReferenceData(environment.base, environment.key);
  const seeded = (await (await fetch(`${environment.base}/v2/jobs`, { headers: { "api-key": environment.key } })).json()).items as JobDocument[];
  const partly = await importAndWait(environment.base, "assets", environment.key, [asset(1), asset(2, { subAreaId: "west" })]);
  const failed = await importAndWait(environment.base, "subareas", environment.key, [{ id: "twice", name: "A" }, { id: "twice", name: "B" }]);
  const dry = await importBatch(environment.base, "subareas?dryRun=true", environment.key, [{ id: "dry", name: "Dry" }]);
  const lastDone = await importAndWait(environment.base, "assets", environment.key, [asset(3)]);
  return { environment, seeded, partly, failed, dry, lastDone };
}

describe("importd jobs list", () => {
  test("the newest first as a table within 80 columns; --status, --type and --dry-run narrow it; --json is one job document per line", async () => {
    const { environment, seeded, partly, failed, dry, lastDone } = await environmentWithJobs("list");
    const newestFirst = [lastDone.id, dry.id, failed.id, partly.id, ...seeded.map((job) => job.id)];

    const table = await jobs(environment, "list");
    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^\s*ID\s+TYPE\s+STATUS\s+RECORDS\s+APPLIED\s+REJECTED\s+CREATED UTC$/);
    expect(idsIn(table.stdout)).toEqual(newestFirst);
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(80);
    const partlyRow = lines.find((line) => line.trim().startsWith(`${partly.id} `))!;
    expect(partlyRow.trim().split(/\s+/).slice(1, 6)).toEqual(["Asset", "PartiallySucceeded", "2", "1", "1"]);
    expect(partlyRow).toContain(partly.createdAt.slice(5, 16).replace("T", " "));
    // The dry run is starred, and the star explained.
    expect(lines.find((line) => line.trim().startsWith(`${dry.id} `))).toContain("Succeeded*");
    expect(lines.at(-1)).toBe("* a dry run: nothing was applied");

    const [partial, subAreas, assetsFailed, dryRuns, realOnes, asJson] = await Promise.all([
      jobs(environment, "list", "--status", "PartiallySucceeded"),
      jobs(environment, "list", "--type", "SubArea"),
      jobs(environment, "list", "--type", "Asset", "--status", "Failed"),
      jobs(environment, "list", "--dry-run"),
      jobs(environment, "list", "--no-dry-run", "--type", "SubArea"),
      jobs(environment, "list", "--json"),
    ]);
    expect(idsIn(partial.stdout)).toEqual([partly.id]);
    expect(idsIn(subAreas.stdout)).toEqual([dry.id, failed.id, seeded.find((job) => job.importJobType === "SubArea")!.id]);
    expect(assetsFailed.stdout).toBe("");
    expect(assetsFailed.stderr).toBe("No jobs match these filters.\n");
    expect(idsIn(dryRuns.stdout)).toEqual([dry.id]);
    expect(idsIn(realOnes.stdout)).toEqual([failed.id, seeded.find((job) => job.importJobType === "SubArea")!.id]);

    // What the API answers, line for line.
    const documents = asJson.stdout.trimEnd().split("\n").map((line) => JSON.parse(line));
    const listed = (await (await fetch(`${environment.base}/v2/jobs`, { headers: { "api-key": environment.key } })).json()).items;
    expect(documents).toEqual(listed);
    expect(documents.map((job: JobDocument) => job.id)).toEqual(newestFirst);
  }, 60_000);

  test("--limit shows the newest n and says on stderr that there are more; --all pages through every job", async () => {
    const environment = await server.addEnvironment("paging");
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.unshift((await importAndWait(environment.base, "subareas", environment.key, [{ id: `s${i}`, name: `S${i}` }])).id);

    const [two, five, all] = await Promise.all([jobs(environment, "list", "--limit", "2"), jobs(environment, "list", "--limit", "5"), jobs(environment, "list", "--all", "--json")]);
    expect(idsIn(two.stdout)).toEqual(ids.slice(0, 2));
    expect(two.stderr).toBe("These are the newest 2; there are more: --limit <n> (up to 1000) or --all lists them.\n");
    // Exactly as many as there are: nothing more to say.
    expect(idsIn(five.stdout)).toEqual(ids);
    expect(five.stderr).toBe("");
    expect(all.stdout.trimEnd().split("\n").map((line) => JSON.parse(line).id)).toEqual(ids);
  }, 60_000);

  test("a filter value the server does not know is exit 2, naming the flag and the values it takes; so is a wrong --limit", async () => {
    const [type, status, limit, both] = await Promise.all([
      jobs(defaultEnvironment(), "list", "--type", "asset"),
      jobs(defaultEnvironment(), "list", "--status", "Done"),
      jobs(defaultEnvironment(), "list", "--limit", "1001"),
      jobs(defaultEnvironment(), "list", "--dry-run", "--no-dry-run"),
    ]);
    expect([type.code, status.code, limit.code, both.code]).toEqual([2, 2, 2, 2]);
    expect(type.stderr).toBe(`importd: --type: 'Type' must be one of: ${jobTypes.join(", ")}. You entered 'asset'.\n`);
    expect(status.stderr).toBe(`importd: --status: 'Status' must be one of: ${jobStatuses.join(", ")}. You entered 'Done'.\n`);
    expect(limit.stderr).toStartWith("importd: --limit must be a whole number from 1 to 1000, not '1001'");
    expect(both.stderr).toStartWith("importd: --dry-run and --no-dry-run do not go together");
  }, 60_000);
});

describe("importd jobs show", () => {
  test("--wait: a Pending job is waited for (stderr says so), then summed up: status, counts, times and message", async () => {
    // Pending until the command is seen waiting, however long it takes to start.
    const parked = await server.parkJob("default", "until released");
    const showing = jobs(defaultEnvironment(), "show", String(parked.id), "--wait");
    // The command has seen the job Pending and is waiting when its poll is held; then the job may run.
    await heldPolls(server.url, 1, 30_000);
    await parked.release();
    await importBatch(server.base, "subareas", server.key, [{ id: "wake", name: "Wakes the queue" }]);

    const shown = await showing;
    expect(shown.code).toBe(0);
    expect(shown.stderr).toStartWith(`job ${parked.id} is Pending; waiting for it to finish (Ctrl-C stops waiting, not the job)`);
    const lines = shown.stdout.trimEnd().split("\n");
    expect(lines.slice(0, 7)).toEqual([
      `job ${parked.id}: Succeeded`,
      "  type         Asset",
      "  operation    upsert: an import",
      "  dry run      no",
      "  records      1",
      // Created before, by an earlier test of this file, or unchanged.
      expect.stringMatching(/^ {2}applied {6}1 \((1 created, 0 updated, 0 unchanged|0 created, 0 updated, 1 unchanged|0 created, 1 updated, 0 unchanged)\)$/),
      "  rejected     0",
    ]);
    expect(lines[7]).toStartWith("  created at   20");
    expect(lines[8]).toMatch(/^ {2}started at {3}20\S+ \(after \d+(\.\d)? m?s in the queue\)$/);
    expect(lines[9]).toMatch(/^ {2}completed at 20\S+ \(ran \d+(\.\d)? m?s\)$/);
    expect(lines[10]).toStartWith("  message      The record was applied");
  }, 60_000);

  test("a delete job: the list gets an OP column (delete, upsert), --operation delete lists only delete jobs, show counts deleted and not found", async () => {
    const environment = await server.addEnvironment("deletes");
    await seedReferenceData(environment.base, environment.key);
    const imported = await importAndWait(environment.base, "assets", environment.key, [asset(1), asset(2)]);
    const deletion = await (await fetch(`${environment.base}/v2/deletions/assets`, { method: "POST", headers: { "api-key": environment.key, "content-type": "application/json" }, body: JSON.stringify([asset(1).id, "NEVER"]) })).json();
    const done = await importd(["jobs", "show", String(deletion.id), "--wait", "--base-url", environment.base], { IMPORTD_API_KEY: environment.key });
    expect(done.code).toBe(0);
    expect(done.stdout).toContain("  operation    delete: a delete job, which deletes the records of the ids it was sent\n");
    expect(done.stdout).toContain("  applied      2 (1 deleted, 1 not found)\n");
    expect(done.stdout).not.toMatch(/created,|updated|unchanged/);

    const [table, deletes, upserts, json] = await Promise.all([
      jobs(environment, "list"),
      jobs(environment, "list", "--operation", "delete"),
      jobs(environment, "list", "--operation", "upsert"),
      jobs(environment, "list", "--operation", "delete", "--json"),
    ]);
    const lines = table.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^\s*ID\s+TYPE\s+OP\s+STATUS\s+RECORDS\s+APPLIED\s+REJECTED\s+CREATED UTC$/);
    expect(lines.find((line) => line.trim().startsWith(`${deletion.id} `))!.trim().split(/\s+/).slice(1, 7)).toEqual(["Asset", "delete", "Succeeded", "2", "2", "0"]);
    expect(lines.find((line) => line.trim().startsWith(`${imported.id} `))!.trim().split(/\s+/).slice(1, 3)).toEqual(["Asset", "upsert"]);
    expect(idsIn(deletes.stdout)).toEqual([deletion.id]);
    expect(idsIn(upserts.stdout)).not.toContain(deletion.id);
    expect(upserts.stdout.split("\n")[0]).not.toContain("OP");
    expect(JSON.parse(json.stdout)).toMatchObject({ id: deletion.id, operation: "delete", output: { deleted: 1, notFound: 1 } });

    const wrong = await jobs(environment, "list", "--operation", "erase");
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain("--operation: 'Operation' must be one of: upsert, delete, syncCompletion.");
  }, 60_000);

  test("a finished job is shown at once; --json is its document; its rejected records are pointed to", async () => {
    const job = await importAndWait(server.base, "assets", server.key, [asset(10), asset(11, { subAreaId: "west" })]);
    const [shown, json] = await Promise.all([jobs(defaultEnvironment(), "show", String(job.id)), jobs(defaultEnvironment(), "show", String(job.id), "--json", "--wait")]);
    expect(shown.code).toBe(0);
    expect(shown.stderr).toBe("");
    expect(shown.stdout).toContain(`job ${job.id}: PartiallySucceeded\n`);
    expect(shown.stdout).toContain("  rejected     1\n");
    expect(shown.stdout).toContain(`  message      ${job.output!.message}\n`);
    expect(shown.stdout).toEndWith(`The rejected records, as sent, each with why: importd jobs rejected ${job.id}\n`);
    expect(JSON.parse(json.stdout)).toEqual(job);
  }, 60_000);

  test("an unknown job: exit 1, one line saying so", async () => {
    const shown = await jobs(defaultEnvironment(), "show", "999999");
    expect(shown.code).toBe(1);
    expect(shown.stdout).toBe("");
    expect(shown.stderr).toBe("importd: job 999999 was not found: No job with this id exists in this environment (job documents are kept for a limited time after they finish).\n");
  }, 60_000);
});

describe("importd jobs rejected", () => {
  test("CSV: every field as a column, nested ones dotted, then _error and _index; fixed, importd import reads it back", async () => {
    const environment = await server.addEnvironment("rejected-csv");
    await seedReferenceData(environment.base, environment.key);
    const sent = [asset(20), asset(21, { subAreaId: "west", name: 'Main St, "old" part' }), asset(22, { subAreaId: "east", geolocation: undefined })];
    const job = await importAndWait(environment.base, "assets", environment.key, sent);
    expect(job.importJobStatus).toBe("PartiallySucceeded");

    const listed = await jobs(environment, "rejected", String(job.id));
    expect(listed.code).toBe(0);
    expect(listed.stderr).toBe(`job ${job.id}: 2 rejected records.\n`);
    const [header, ...rows] = listed.stdout.trimEnd().split("\n");
    expect(header).toBe(
      "id,subAreaId,name,description,status,assetCategoryId,assetTypeId,shapeType,startPoint,endPoint," +
        "geolocation.linearReferenceStart,geolocation.linearReferenceEnd,geolocation.locationStart,geolocation.locationEnd,geolocation.locationUnit,_error,_index",
    );
    expect(rows).toHaveLength(2);
    expect(rows[0]).toStartWith(`A-0000021,west,"Main St, ""old"" part","Cast iron, laid 1962, relined 2004",ACT,water,valve,LineString,21,31.5,LR-21,LR-22,42,49,m,"'Sub Area Id' 'west' does not exist`);
    expect(rows[0]).toEndWith(",1");
    // A record without geolocation has its columns empty: absent, to the importer.
    expect(rows[1]).toStartWith("A-0000022,east,Water main 22 on Long Street between the old mill and the station,\"Cast iron, laid 1962, relined 2004\",ACT,water,pipe,LineString,22,32.5,,,,,,");
    expect(rows[1]).toEndWith(",2");

    // Fixed, the file imports as it is: the _ columns are not data, dotted columns nest, numbers are numbers.
    const file = join(dir, "rejected.csv");
    writeFileSync(file, listed.stdout.replaceAll(",west,", ",north,").replaceAll(",east,", ",south,"));
    const imported = await importd(["import", file, "--resource", "assets", "--base-url", environment.base], { IMPORTD_API_KEY: environment.key });
    expect({ code: imported.code, stderr: imported.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    const stored = async (id: string) => (await fetch(`${environment.base}/v2/assets/${id}`, { headers: { "api-key": environment.key } })).json();
    const { updatedAt: _u, lastJobId: _l, ...fixed } = await stored("A-0000021");
    expect(fixed).toEqual({ ...sent[1], subAreaId: "north" });
    const { updatedAt: _u2, lastJobId: _l2, ...withoutGeolocation } = await stored("A-0000022");
    const { geolocation: _g, ...expected } = sent[2]!;
    expect(withoutGeolocation).toEqual({ ...expected, subAreaId: "south" });
  }, 60_000);

  test("--format json: one record per line, as sent, with _error and _index; a job that rejected nothing prints nothing", async () => {
    const sent = [asset(30), asset(31, { subAreaId: "west", unknownField: { kept: [1, 2] } })];
    const job = await importAndWait(server.base, "assets", server.key, sent);
    const clean = await importAndWait(server.base, "subareas", server.key, [{ id: "clean", name: "Clean" }]);
    const [json, none] = await Promise.all([jobs(defaultEnvironment(), "rejected", String(job.id), "--format", "json"), jobs(defaultEnvironment(), "rejected", String(clean.id))]);
    expect(json.code).toBe(0);
    expect(json.stdout.trimEnd().split("\n").map((line) => JSON.parse(line))).toEqual([
      { ...sent[1], _error: job.output!.errors[0]!.message, _index: 1 },
    ]);
    expect(none).toEqual({ code: 0, stdout: "", stderr: `job ${clean.id} rejected no records.\n` });
  }, 60_000);

  test("a job that has not finished: exit 1, saying so and how to wait for it", async () => {
    const environment = await server.addEnvironment("rejected-pending");
    const parked = await server.parkJob("rejected-pending", "until released");
    const listed = await jobs(environment, "rejected", String(parked.id));
    expect(listed.code).toBe(1);
    expect(listed.stdout).toBe("");
    expect(listed.stderr).toBe(
      `importd: job ${parked.id} has not finished yet (it is Pending): which records it rejects is known once it has. Wait for it with importd jobs show ${parked.id} --wait, then ask again.\n`,
    );
    await parked.release();
  }, 60_000);
});

describe("mistakes", () => {
  test("a key the server refuses: exit 2, one line naming both causes (a wrong key, an environment that does not exist)", async () => {
    const [wrongKey, noEnvironment] = await Promise.all([
      jobs({ base: server.base, key: "0".repeat(64) + "_1" }, "list"),
      jobs({ base: `${server.url}/nowhere`, key: server.key }, "show", "1"),
    ]);
    for (const [run, environment] of [[wrongKey, "default"], [noEnvironment, "nowhere"]] as const) {
      expect(run.code).toBe(2);
      expect(run.stderr.trimEnd().split("\n")).toEqual([
        `importd: the server refused the API key (401): the key is wrong or revoked, or there is no environment '${environment}' (the end of --base-url); importd answers both alike. ` +
          `Check the name (importd env list, on the server) and use a key of that environment (importd key list ${environment}).`,
      ]);
    }
  }, 60_000);

  test("a flag of another jobs command, or a missing id: exit 2", async () => {
    const [wait, id, format] = await Promise.all([
      jobs(defaultEnvironment(), "list", "--wait"),
      jobs(defaultEnvironment(), "show"),
      jobs(defaultEnvironment(), "rejected", "1", "--format", "xml"),
    ]);
    expect([wait.code, id.code, format.code]).toEqual([2, 2, 2]);
    expect(wait.stderr).toStartWith("importd: --wait is not a flag of jobs list (importd jobs --help lists each command's flags)");
    expect(id.stderr).toStartWith("importd: jobs show takes one job id (a positive whole number)\n");
    expect(format.stderr).toStartWith("importd: --format must be csv or json, not 'xml'");
  }, 60_000);
});

describe("help", () => {
  test("importd jobs --help lists the four commands with their flags, the statuses and types; each command's --help is the same", async () => {
    const [help, listHelp, showHelp] = await Promise.all([importd(["jobs", "--help"]), importd(["jobs", "list", "--help"]), importd(["jobs", "show", "--help"])]);
    expect(help.code).toBe(0);
    for (const usage of [
      "importd jobs list [--status <status>] [--type <type>] [--operation <op>] [--dry-run | --no-dry-run]\n                    [--limit <n> | --all] [--json]",
      "importd jobs show <id> [--wait] [--json]",
      "importd jobs rejected <id> [--format csv|json]",
      "importd jobs cancel <id>",
      "--base-url <url>",
    ]) {
      expect(help.stdout).toContain(usage);
    }
    expect(help.stdout).toContain(`--status <status>   only jobs in this state: ${jobStatuses.join(", ")}`);
    expect(help.stdout).toContain(`--type <type>       only jobs of this type: ${jobTypes.join(", ")}`);
    expect(help.stdout).toContain(
      "--operation <op>    only jobs that do this: upsert (an import),\n                      delete (a delete job),\n                      syncCompletion (a mirror's completion)",
    );
    expect(listHelp.stdout).toBe(help.stdout);
    expect(showHelp.stdout).toBe(help.stdout);
  }, 60_000);

  test("importd env --help and importd key --help are about env and key; importd --help stays the whole usage", async () => {
    const [env, key, all] = await Promise.all([importd(["env", "--help"]), importd(["key", "list", "--help"]), importd(["--help"])]);
    expect(env.code).toBe(0);
    expect(env.stdout).toStartWith("importd env: ");
    expect(env.stdout).toContain("importd env create <slug>");
    expect(env.stdout).toContain("importd env list");
    expect(env.stdout).toContain("--data-dir <dir>");
    expect(key.code).toBe(0);
    expect(key.stdout).toStartWith("importd key: ");
    for (const command of ["importd key create <slug>", "importd key list <slug>", "importd key revoke <keyId>"]) expect(key.stdout).toContain(command);
    expect(all.stdout).toContain("Options (flags beat environment variables, which beat defaults):");
    for (const command of ["jobs list", "jobs show <id>", "jobs rejected <id>", "jobs cancel <id>"]) expect(all.stdout).toContain(`importd ${command}`);
    expect(env.stdout).not.toContain("Options (flags beat");
  }, 60_000);
});
