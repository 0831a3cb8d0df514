import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pkg from "../../package.json" with { type: "json" };
import { options } from "../../src/config";
import { importd, spawnServer } from "../helpers/process";
import { tempDir, testBackend } from "../helpers/server";

// Spawning Bun and opening a database takes a moment; a test here runs a few commands.
const timeoutMs = 30_000;

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
const dataDir = () => {
  const dir = tempDir("importd-cli-");
  dirs.push(dir);
  return dir;
};


/** Runs a command that must succeed and returns its stdout. */
async function ok(args: string[], env: Record<string, string> = {}): Promise<string> {
  const run = await importd(args, env);
  if (run.code !== 0) throw new Error(`importd ${args.join(" ")} exited ${run.code}: ${run.stderr}`);
  return run.stdout;
}

const keyPattern = /^[0-9a-f]{64}_\d+$/;
const noStackTrace = (stderr: string) => expect(stderr).not.toMatch(/^\s+at /m);
const environmentsIn = (stdout: string) => stdout.trim().split("\n").filter(Boolean).map((line) => line.split("\t")[0]);
const keyRows = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .slice(1)
    .map((line) => {
      const [keyId, createdAt, revokedAt] = line.split("\t");
      return { keyId: Number(keyId), createdAt, revokedAt };
    });

describe("importd env", () => {
  test("env create acme-prod, then env list shows it", async () => {
    const dir = dataDir();
    expect(await ok(["env", "create", "acme-prod", "--data-dir", dir])).toContain("acme-prod");
    expect(environmentsIn(await ok(["env", "list", "--data-dir", dir]))).toEqual(["acme-prod"]);
  }, timeoutMs);

  test.each([
    ["upper case", "Acme"],
    ["a leading '-'", "-x"],
    ["an underscore", "a_b"],
    ["64 characters", "a".repeat(64)],
  ])("rejects a slug with %s: non-zero exit and a clear message", async (_, slug) => {
    const dir = dataDir();
    // After "--", so that "-x" reaches the slug check instead of the flag parser.
    const run = await importd(["env", "create", "--data-dir", dir, "--", slug]);
    expect(run.code).not.toBe(0);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain(`'${slug}' is not a valid environment name`);
    noStackTrace(run.stderr);
    expect(await ok(["env", "list", "--data-dir", dir])).toBe("");
  }, timeoutMs);

  test("a bare -x slug is taken for an unknown flag: exit 2, naming it", async () => {
    const run = await importd(["env", "create", "-x", "--data-dir", dataDir()]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("'-x'");
    noStackTrace(run.stderr);
  }, timeoutMs);

  test("accepts a slug of 63 characters", async () => {
    const dir = dataDir();
    await ok(["env", "create", "a".repeat(63), "--data-dir", dir]);
    expect(environmentsIn(await ok(["env", "list", "--data-dir", dir]))).toEqual(["a".repeat(63)]);
  }, timeoutMs);

  test("creating an environment twice fails and says it exists", async () => {
    const dir = dataDir();
    await ok(["env", "create", "acme-prod", "--data-dir", dir]);
    const run = await importd(["env", "create", "acme-prod", "--data-dir", dir]);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain("'acme-prod' already exists");
    expect(environmentsIn(await ok(["env", "list", "--data-dir", dir]))).toEqual(["acme-prod"]);
  }, timeoutMs);

  test("env create without a slug is a usage error", async () => {
    const run = await importd(["env", "create", "--data-dir", dataDir()]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("missing <slug>");
  }, timeoutMs);
});

describe("importd key", () => {
  test("key create prints the key alone on stdout: <64 hex>_<id>", async () => {
    const dir = dataDir();
    await ok(["env", "create", "acme-prod", "--data-dir", dir]);
    const stdout = await ok(["key", "create", "acme-prod", "--data-dir", dir]);
    expect(stdout.endsWith("\n")).toBe(true);
    expect(stdout.trimEnd().split("\n")).toHaveLength(1);
    expect(stdout.trimEnd()).toMatch(keyPattern);
    const second = (await ok(["key", "create", "acme-prod", "--data-dir", dir])).trim();
    expect(second).toMatch(keyPattern);
    expect(second.split("_")[0]).not.toBe(stdout.trim().split("_")[0]);
  }, timeoutMs);

  test("key create for an unknown environment fails and names it", async () => {
    const run = await importd(["key", "create", "nope", "--data-dir", dataDir()]);
    expect(run.code).not.toBe(0);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain("'nope'");
    expect(run.stderr).toContain("does not exist");
    noStackTrace(run.stderr);
  }, timeoutMs);

  test("key list shows the ids and never a secret", async () => {
    const dir = dataDir();
    await ok(["env", "create", "acme-prod", "--data-dir", dir]);
    const keys = [(await ok(["key", "create", "acme-prod", "--data-dir", dir])).trim(), (await ok(["key", "create", "acme-prod", "--data-dir", dir])).trim()];
    const stdout = await ok(["key", "list", "acme-prod", "--data-dir", dir]);
    expect(keyRows(stdout).map((row) => row.keyId)).toEqual(keys.map((key) => Number(key.split("_")[1])));
    for (const key of keys) expect(stdout).not.toContain(key.split("_")[0]);
    expect(stdout).not.toMatch(/[0-9a-f]{32}/);
  }, timeoutMs);

  test("key list for an unknown environment fails and names it", async () => {
    const run = await importd(["key", "list", "nope", "--data-dir", dataDir()]);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain("'nope'");
  }, timeoutMs);

  test("key revoke marks the key revoked in key list, and only that key", async () => {
    const dir = dataDir();
    await ok(["env", "create", "acme-prod", "--data-dir", dir]);
    const [kept, revoked] = [(await ok(["key", "create", "acme-prod", "--data-dir", dir])).trim(), (await ok(["key", "create", "acme-prod", "--data-dir", dir])).trim()];
    const revokedId = Number(revoked.split("_")[1]);
    expect(await ok(["key", "revoke", String(revokedId), "--data-dir", dir])).toContain(`revoked key ${revokedId}`);
    const rows = keyRows(await ok(["key", "list", "acme-prod", "--data-dir", dir]));
    expect(rows.find((row) => row.keyId === revokedId)!.revokedAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(rows.find((row) => row.keyId === Number(kept.split("_")[1]))!.revokedAt).toBe("-");
  }, timeoutMs);

  test("revoking an unknown key id fails and says so", async () => {
    const run = await importd(["key", "revoke", "999", "--data-dir", dataDir()]);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain("key 999 does not exist");
    noStackTrace(run.stderr);
  }, timeoutMs);

  test("revoking a key twice fails the second time", async () => {
    const dir = dataDir();
    await ok(["env", "create", "acme-prod", "--data-dir", dir]);
    const keyId = (await ok(["key", "create", "acme-prod", "--data-dir", dir])).trim().split("_")[1]!;
    await ok(["key", "revoke", keyId, "--data-dir", dir]);
    const run = await importd(["key", "revoke", keyId, "--data-dir", dir]);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain("already revoked");
  }, timeoutMs);

  test("key revoke with something that is not a key id is a usage error", async () => {
    const run = await importd(["key", "revoke", "abc", "--data-dir", dataDir()]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("'abc' is not a key id");
  }, timeoutMs);
});

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
    for (const command of ["serve", "env create <slug>", "env list", "key create <slug>", "key list <slug>", "key revoke <keyId>", "--help", "--version"]) {
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

describe("importd serve", () => {
  test("on an empty data directory prints a key for default once; a second start prints none", async () => {
    const dir = dataDir();
    const first = await spawnServer(dir, ["--workers", "2"]);
    try {
      expect(first.firstRunKey).toMatch(keyPattern);
      const printed = first.stdout.join("\n");
      expect(printed.split(first.firstRunKey!).length - 1).toBe(1);
      // With the URLs of the console and of Swagger UI, which answer.
      expect(printed).toContain(`console: ${first.url}/console; Swagger UI: ${first.url}/swagger`);
      expect((await fetch(`${first.url}/swagger`)).status).toBe(200);
      expect((await fetch(`${first.url}/console`)).status).toBe(200);
      // The printed key is a working key of `default`.
      expect((await fetch(`${first.url}/default/v2/jobs`, { headers: { "Api-Key": first.firstRunKey! } })).status).toBe(200);
    } finally {
      first.proc.kill("SIGTERM");
      await first.proc.exited;
    }

    const second = await spawnServer(dir, ["--workers", "2"]);
    try {
      expect(second.firstRunKey).toBeUndefined();
      expect(second.stdout.join("\n")).not.toMatch(/[0-9a-f]{64}_\d+/);
      expect(second.stdout.join("\n")).not.toContain("First run");
      // The first key still works after the restart.
      expect((await fetch(`${second.url}/default/v2/jobs`, { headers: { "Api-Key": first.firstRunKey! } })).status).toBe(200);
    } finally {
      second.proc.kill("SIGTERM");
      await second.proc.exited;
    }
    expect(environmentsIn(await ok(["env", "list", "--data-dir", dir]))).toEqual(["default"]);
  }, 60_000);

  test("a busy port gives one clear line and exit 1, and the failed start leaves no key unshown", async () => {
    const dir = dataDir();
    const squatter = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("busy") });
    try {
      const run = await importd(["serve", "--port", String(squatter.port), "--host", "127.0.0.1", "--data-dir", dir, "--workers", "2"]);
      expect(run.code).toBe(1);
      expect(run.stderr.trim().split("\n")).toEqual([
        `importd: cannot listen on 127.0.0.1:${squatter.port}: the port is already in use. Stop the other process or choose another with --port (IMPORTD_PORT).`,
      ]);
      expect(run.stdout).not.toMatch(/[0-9a-f]{64}_\d+/);
    } finally {
      squatter.stop(true);
    }
    // The key of `default` is created only once the server listens, so the next good start shows it.
    expect(environmentsIn(await ok(["env", "list", "--data-dir", dir]))).toEqual([]);
    const server = await spawnServer(dir, ["--workers", "2"]);
    try {
      expect(server.firstRunKey).toMatch(keyPattern);
    } finally {
      server.proc.kill("SIGTERM");
      await server.proc.exited;
    }
  }, 60_000);

  test("does not create default when the data directory already has an environment", async () => {
    const dir = dataDir();
    await ok(["env", "create", "acme-prod", "--data-dir", dir]);
    const server = await spawnServer(dir, ["--workers", "2"]);
    try {
      expect(server.firstRunKey).toBeUndefined();
    } finally {
      server.proc.kill("SIGTERM");
      await server.proc.exited;
    }
    expect(environmentsIn(await ok(["env", "list", "--data-dir", dir]))).toEqual(["acme-prod"]);
  }, 60_000);
});
