import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { projectRoot } from "../helpers/process";
import { cast, codeWithoutComments, runIn, typecheck } from "./generator-run";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";

// A client generated from the served document, as a TypeScript developer would make one: openapi-typescript
// writes the types, tests/openapi/walkthrough.ts uses them through openapi-fetch. It must typecheck under
// --strict (the walk-through has no cast), and it runs against the real server.

let server: TestServer;
const dir = tempDir("importd-openapi-client-");
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const run = (command: string[]) => runIn(dir, command);

test("types generated with openapi-typescript typecheck the walk-through under --strict, and it runs as the README says", async () => {
  writeFileSync(join(dir, "importd.openapi.json"), await (await fetch(`${server.url}/swagger/json`)).text());
  const generated = await run([join(projectRoot, "node_modules/.bin/openapi-typescript"), "importd.openapi.json", "-o", "importd.d.ts"]);
  expect(generated).toMatchObject({ code: 0 });
  copyFileSync(join(import.meta.dir, "walkthrough.ts"), join(dir, "walkthrough.ts"));
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, target: "ES2022", module: "ESNext", moduleResolution: "Bundler", lib: ["ES2022", "DOM"], skipLibCheck: true, types: [], baseUrl: ".", paths: { "openapi-fetch": [join(projectRoot, "node_modules/openapi-fetch")] } },
      files: ["walkthrough.ts"],
    }),
  );
  const checked = await typecheck(dir);
  expect(checked.output).toBe("");
  expect(checked.code).toBe(0);
  // Not a cast anywhere (comments aside): only `as const`, for the literal types of a record built by hand.
  expect(await codeWithoutComments(join(import.meta.dir, "walkthrough.ts"))).not.toMatch(cast);

  const { walkthrough } = (await import(join(dir, "walkthrough.ts"))) as { walkthrough: (baseUrl: string, apiKey: string) => Promise<string[]> };
  expect(await walkthrough(server.base, server.key)).toEqual([
    "SubArea Succeeded",
    "AssetType Succeeded",
    "AssetCategory Succeeded",
    "assets Succeeded 1 of 1, created 1",
    "replay same job true",
    "partial PartiallySucceeded, rejected index 1 field subAreaId",
    "duplicates Failed",
    "invalid 400 [0].subAreaId",
    "read PIPE-0001 written by job of step 1",
    "list PIPE-0001,PIPE-0002 next PIPE-0002",
    "failed jobs 1",
    "delete Succeeded, deleted 1 not found 1, deletions PIPE-0002 by that job, next null, resume a position",
    "sync open, joined Succeeded, dry run would delete 1, syncCompletion Succeeded deleted 1 of 1, sync completed by that job, sent 2",
  ]);
}, 120_000);
