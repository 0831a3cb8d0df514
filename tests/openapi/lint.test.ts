import { afterAll, beforeAll, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { projectRoot } from "../helpers/process";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";

// The served OpenAPI document passes Redocly's linter with its recommended rules: what a developer starting
// from /swagger/json would run first.

let server: TestServer;
const dir = tempDir("importd-openapi-lint-");
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

test("redocly lint (recommended rules) finds no error and no warning in /swagger/json", async () => {
  const file = join(dir, "importd.openapi.json");
  writeFileSync(file, await (await fetch(`${server.url}/swagger/json`)).text());
  const lint = Bun.spawn([join(projectRoot, "node_modules/.bin/redocly"), "lint", "--extends=recommended", file], {
    cwd: dir,
    env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(lint.stdout).text(), new Response(lint.stderr).text(), lint.exited]);
  const output = `${stdout}\n${stderr}`;
  expect(output).not.toMatch(/\d+ errors?|\d+ warnings?/);
  expect(output).toContain("Your API description is valid");
  expect(code).toBe(0);
}, 60_000);
