import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { projectRoot } from "../helpers/process";
import { cast, codeWithoutComments, runIn, typecheck } from "./generator-run";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";

// A second, independent generator reads the served document: @hey-api/openapi-ts writes an SDK with its own fetch
// client (no runtime package: the client is written beside the SDK), and tests/openapi/walkthrough-hey-api.ts uses
// it. Like generated-client.test.ts, it must typecheck under --strict without a cast, and it runs against the real
// server. It runs under Bun, as every tool here does; pinned to 0.94.3: from 0.96 on it declares Node 22, and
// npm ci would warn on the README's Node 20.

let server: TestServer;
const dir = tempDir("importd-openapi-hey-api-");
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const run = (command: string[]) => runIn(dir, command);

test("an SDK generated with @hey-api/openapi-ts typechecks the walk-through under --strict, and it runs as the README says", async () => {
  writeFileSync(join(dir, "importd.openapi.json"), await (await fetch(`${server.url}/swagger/json`)).text());
  // Written first: the generator reads the tsconfig.json of its directory to choose how its files import each other.
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, target: "ES2022", module: "ESNext", moduleResolution: "Bundler", lib: ["ES2022", "DOM", "DOM.Iterable"], skipLibCheck: true, types: [] },
      files: ["walkthrough-hey-api.ts"],
    }),
  );
  const generator = join(projectRoot, "node_modules/@hey-api/openapi-ts/bin/run.js");
  const generated = await run([process.execPath, generator, "-i", "importd.openapi.json", "-o", "importd", "-c", "@hey-api/client-fetch", "--no-log-file"]);
  expect(generated).toMatchObject({ code: 0 });
  copyFileSync(join(import.meta.dir, "walkthrough-hey-api.ts"), join(dir, "walkthrough-hey-api.ts"));
  const checked = await typecheck(dir);
  expect(checked.output).toBe("");
  expect(checked.code).toBe(0);
  // Not a cast anywhere (comments aside): only `as const`.
  expect(await codeWithoutComments(join(import.meta.dir, "walkthrough-hey-api.ts"))).not.toMatch(cast);

  const { walkthrough } = (await import(join(dir, "walkthrough-hey-api.ts"))) as { walkthrough: (baseUrl: string, apiKey: string) => Promise<string[]> };
  expect(await walkthrough(server.base, server.key)).toEqual([
    "SubArea Succeeded",
    "AssetType Succeeded",
    "AssetCategory Succeeded",
    "assets Succeeded 2 of 2, created 2",
    "read PIPE-0001 LineString drawn as line, 0 to 0.5 km (500 m)",
    "partial PartiallySucceeded, rejected [1] PIPE-0003 at subAreaId, record unchanged",
    "duplicates Failed",
    "cancel 409 Conflict",
    "failed jobs the duplicates",
    "invalid 400 [0].subAreaId: 'Sub Area Id' must not be empty.",
    "list PIPE-0001,PIPE-0002 | VALVE-0001",
    "delete Succeeded, deleted 1, deletions PIPE-0002, read 404 deleted by that job",
    "sync open, joined Succeeded, dry run would delete 1, syncCompletion Succeeded deleted 1 of 1, sync completed by that job, sent 2",
  ]);
}, 120_000);
