import { describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pkg from "../../package.json" with { type: "json" };
import { options } from "../../src/config";
import { cliDataDirs, cliTimeoutMs, environmentsIn, noStackTrace, ok } from "../helpers/cli";
import { importd } from "../helpers/process";
import { testBackend } from "../helpers/server";

// The command line itself: usage errors, --help and --version, where the configuration comes from. None of it
// reaches a database past opening one, so it runs in the SQLite pass only; the commands' work on the store, on both
// backends, is in cli.test.ts.

const timeoutMs = cliTimeoutMs;
const dataDir = cliDataDirs();

describe("usage errors", () => {
  test("an unknown command exits 2 and names it", async () => {
    const run = await importd(["frobnicate", "--data-dir", dataDir()]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("unknown command 'frobnicate'");
    expect(run.stderr).toContain("--help");
    noStackTrace(run.stderr);
  }, timeoutMs);

  test("an unknown env subcommand exits 2", async () => {
    const run = await importd(["env", "delete", "x", "--data-dir", dataDir()]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("unknown env command 'delete'");
  }, timeoutMs);

  test.each([
    ["an unknown env subcommand", ["env", "delete", "x"]],
    ["env create without a slug", ["env", "create"]],
    ["an unknown key subcommand", ["key", "rotate", "1"]],
    ["key create without a slug", ["key", "create"]],
    ["key list without a slug", ["key", "list"]],
    ["key revoke with a non-number", ["key", "revoke", "abc"]],
    ["key revoke with an id beyond the safe integer range", ["key", "revoke", "9007199254740993"]],
  ])("%s exits 2 and creates no database", async (_, args) => {
    const dir = join(dataDir(), "not-yet");
    const run = await importd([...args, "--data-dir", dir]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("Run importd --help");
    expect(existsSync(dir)).toBe(false);
  }, timeoutMs);

  test.each([
    ["storage backup without --to", ["storage", "backup"], "missing --to <file>: the backup file to write"],
    ["storage restore without --from", ["storage", "restore"], "missing --from <file>: the backup file to restore"],
    ["storage restore with --to", ["storage", "restore", "--from", "x.sqlite", "--to", "y"], "storage restore takes --from <file> (the backup) and --data-dir <dir>, not --to"],
    ["storage backup with --force", ["storage", "backup", "--to", "x.sqlite", "--force"], "--force is for storage restore only"],
    ["storage backup with --from", ["storage", "backup", "--from", "x.sqlite"], "--from is for storage restore and storage copy; storage backup takes --to"],
    ["storage copy both ways", ["storage", "copy", "--to", "postgres://u@h/up", "--from", "postgres://u@h/down"], "storage copy goes one way: --to <postgres-url> copies the data directory up into PostgreSQL, --from <postgres-url> copies PostgreSQL down"],
    ["storage copy neither way", ["storage", "copy"], "missing --to <postgres-url> (the empty PostgreSQL database to copy the data directory into) or --from <postgres-url>"],
    ["storage copy with --force", ["storage", "copy", "--from", "postgres://u@h/down", "--force"], "--force is for storage restore only"],
    ["an unknown storage command", ["storage", "dump", "--to", "x"], "unknown storage command 'dump': use storage backup --data-dir <dir> --to <file>, storage restore"],
    ["storage backup with an argument", ["storage", "backup", "now", "--to", "x"], "storage backup takes no arguments, got 'now'"],
  ])("%s exits 2 with one line and creates nothing", async (_, args, message) => {
    const dir = join(dataDir(), "not-yet");
    const run = await importd([...args, "--data-dir", dir]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(message);
    expect(run.stderr).toContain("Run importd --help");
    noStackTrace(run.stderr);
    expect(existsSync(dir)).toBe(false);
  }, timeoutMs);

  test("storage backup and restore on a configuration for PostgreSQL exit 2 and point to PostgreSQL's own tools", async () => {
    for (const args of [["storage", "backup", "--to", join(dataDir(), "b.sqlite")], ["storage", "restore", "--from", join(dataDir(), "b.sqlite")]]) {
      const run = await importd([...args, "--data-dir", dataDir()], { IMPORTD_DATABASE_URL: "postgres://importd:hidden@db.example/importd" });
      expect(run.code).toBe(2);
      expect(run.stderr).toContain(`${args.slice(0, 2).join(" ")} is for the appliance's SQLite database, and IMPORTD_DATABASE_URL says this importd uses PostgreSQL: back that up with pg_dump`);
      expect(run.stderr).not.toContain("hidden");
    }
  }, timeoutMs);

  test("scheduled backups' flags without --backup-dir exit 2 and say what is missing", async () => {
    const run = await importd(["serve", "--port", "0", "--backup-every", "6", "--data-dir", dataDir()]);
    expect(run.code).toBe(2);
    expect(run.stderr.trimEnd().split("\n")).toEqual(["importd: --backup-every is for scheduled backups, which need --backup-dir <dir> (IMPORTD_BACKUP_DIR): the directory to keep them in"]);
    const hours = await importd(["serve", "--port", "0", "--backup-dir", join(dataDir(), "b"), "--backup-every", "0", "--data-dir", dataDir()]);
    expect(hours.code).toBe(2);
    expect(hours.stderr).toContain("--backup-every must be a number of hours above 0 and at most 8760 (a year), such as 24 or 0.5, not '0'");
  }, timeoutMs);

  test("an unknown flag exits 2 and names it", async () => {
    const run = await importd(["env", "list", "--bogus", "--data-dir", dataDir()]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("--bogus");
    noStackTrace(run.stderr);
  }, timeoutMs);

  test("--port 70000 gives one clear line on stderr and exit 2, no stack trace", async () => {
    const run = await importd(["serve", "--port", "70000", "--data-dir", dataDir()]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(run.stderr).toContain("--port must be a whole number from 0 to 65535, not '70000'");
  }, timeoutMs);

  test("a data directory that is a file gives one clear line and exit 2", async () => {
    const file = join(dataDir(), "not-a-dir");
    writeFileSync(file, "");
    const run = await importd(["serve", "--port", "0", "--data-dir", file]);
    expect(run.code).toBe(2);
    expect(run.stderr.trimEnd().split("\n")).toEqual([`importd: --data-dir '${file}' is a file, not a directory`]);
  }, timeoutMs);

  test("a negative body limit, written as the next argument, gives one clear line and exit 2", async () => {
    const run = await importd(["serve", "--max-body-bytes", "-5", "--data-dir", dataDir()]);
    expect(run.code).toBe(2);
    expect(run.stderr.trimEnd().split("\n")).toEqual(["importd: --max-body-bytes must be a whole number from 1 to 1073741824, not '-5'"]);
  }, timeoutMs);

  test("a bad IMPORTD_PORT names the variable and exits 2", async () => {
    const run = await importd(["env", "list", "--data-dir", dataDir()], { IMPORTD_PORT: "eighty" });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("IMPORTD_PORT");
    noStackTrace(run.stderr);
  }, timeoutMs);
});

describe("--help and --version", () => {
  test("--help lists every command, and every option with its default and environment variable", async () => {
    const stdout = await ok(["--help"]);
    for (const command of ["serve", "env create <slug>", "env list", "key create <slug>", "key list <slug>", "key revoke <keyId>", "import <file>", "delete <file of ids>", "export --resource <resource>", "storage backup --data-dir <dir> --to <file>", "storage restore --from <file> --data-dir <dir> [--force]", "storage copy --data-dir <dir> --to <postgres-url>", "storage copy --from <postgres-url> --data-dir <dir>", "--help", "--version"]) {
      expect(stdout).toContain(command);
    }
    const lines = stdout.split("\n");
    for (const option of Object.values(options)) {
      const line = lines.find((text) => text.trimStart().startsWith(`--${option.flag} `));
      expect(line, `--${option.flag}`).toBeDefined();
      expect(line).toContain(option.env);
      expect(line).toContain(`default ${"shownDefault" in option ? option.shownDefault : option.default}`);
    }
    expect(await ok(["serve", "--help"])).toBe(stdout);
  }, timeoutMs);

  test("storage --help tells backup, restore and copy both ways, each with its flags and what it refuses", async () => {
    const stdout = await ok(["storage", "--help"]);
    for (const text of ["importd storage backup --data-dir <dir> --to <file>", "importd storage restore --from <file> --data-dir <dir> [--force]", "importd storage copy --data-dir <dir> --to <postgres-url>", "importd storage copy --from <postgres-url> --data-dir <dir>", "renamed into", "integrity_check", "--force", "refuses to run while a server runs", "TLS files"]) {
      expect(stdout).toContain(text);
    }
  }, timeoutMs);

  test("export --help says what it writes and each of its flags; a wrong flag value exits 2 before anything is asked", async () => {
    const help = await ok(["export", "--help"]);
    for (const flag of ["--resource", "--base-url", "--api-key", "--ca-file", "--format", "-o, --output", "--updated-since", "Exit code"]) expect(help).toContain(flag);
    const connection = ["--base-url", "http://127.0.0.1:9/default", "--api-key", "k"];
    for (const [args, message] of [
      [["--resource", "pipes", ...connection], "--resource must be one of subareas, assettypes, assetcategories, assets, not 'pipes'"],
      [["--resource", "assets", "--format", "xml", ...connection], "--format must be one of csv, ndjson, not 'xml'"],
      [["--resource", "assets", "file.csv", ...connection], "export takes no file to read, got 'file.csv'"],
      [["--resource", "assets", "--base-url", "http://127.0.0.1:9"], "--base-url must be an environment's base URL"],
    ] as const) {
      const run = await importd(["export", ...args]);
      expect(run.code).toBe(2);
      expect(run.stderr).toContain(message);
      noStackTrace(run.stderr);
    }
  }, timeoutMs);

  test("--version prints the package version", async () => {
    expect(await ok(["--version"])).toBe(`${pkg.version}\n`);
  }, timeoutMs);
});

describe("configuration sources", () => {
  // Where SQLite's file is: on PostgreSQL (TEST_BACKEND=postgres) the database URL says where the data is.
  const sqliteTest = testBackend === "sqlite" ? test : () => {};
  sqliteTest("IMPORTD_DATA_DIR is used when there is no --data-dir flag", async () => {
    const dir = dataDir();
    await ok(["env", "create", "from-env"], { IMPORTD_DATA_DIR: dir });
    expect(environmentsIn(await ok(["env", "list", "--data-dir", dir]))).toEqual(["from-env"]);
  }, timeoutMs);

  sqliteTest("--data-dir beats IMPORTD_DATA_DIR", async () => {
    const [fromEnv, fromFlag] = [dataDir(), dataDir()];
    await ok(["env", "create", "from-flag", "--data-dir", fromFlag], { IMPORTD_DATA_DIR: fromEnv });
    expect(environmentsIn(await ok(["env", "list", "--data-dir", fromFlag]))).toEqual(["from-flag"]);
    expect(environmentsIn(await ok(["env", "list", "--data-dir", fromEnv]))).toEqual([]);
  }, timeoutMs);

  test("a valid flag beats a bad environment variable", async () => {
    const dir = dataDir();
    await ok(["env", "create", "x", "--data-dir", dir, "--port", "8080"], { IMPORTD_PORT: "eighty" });
  }, timeoutMs);
});
