import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { cliDataDirs, cliTimeoutMs, environmentsIn, noStackTrace, ok } from "../helpers/cli";
import { importd, spawnServer } from "../helpers/process";

const timeoutMs = cliTimeoutMs;
const dataDir = cliDataDirs();
const keyPattern = /^[0-9a-f]{64}_\d+$/;

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

describe("importd serve", () => {
  test("on an empty data directory prints a key for default once; a second start prints none", async () => {
    const dir = dataDir();
    const first = await spawnServer(dir, ["--workers", "1"]);
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

    const second = await spawnServer(dir, ["--workers", "1"]);
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
      const run = await importd(["serve", "--port", String(squatter.port), "--host", "127.0.0.1", "--data-dir", dir, "--workers", "1"]);
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
    const server = await spawnServer(dir, ["--workers", "1"]);
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
    const server = await spawnServer(dir, ["--workers", "1"]);
    try {
      expect(server.firstRunKey).toBeUndefined();
    } finally {
      server.proc.kill("SIGTERM");
      await server.proc.exited;
    }
    expect(environmentsIn(await ok(["env", "list", "--data-dir", dir]))).toEqual(["acme-prod"]);
  }, 60_000);
});
