import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, existsSync, readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { importAndWait, importBatch, waitForJob } from "../helpers/api";
import { projectRoot, spawnServer, type Launch, type ServerProcess } from "../helpers/process";
import { assets, seedReferenceData } from "../helpers/records";
import { tempDir } from "../helpers/server";

// `npm run build`, then the binary alone in an empty directory, with a PATH on which there is no Bun.
const dir = tempDir("importd-binary-");
const bareEnv = { PATH: "/usr/bin:/bin", HOME: dir };
let launch: Launch;
let running: ServerProcess | undefined;

beforeAll(() => {
  const build = Bun.spawnSync(["npm", "run", "build"], { cwd: projectRoot, stdout: "pipe", stderr: "pipe" });
  if (build.exitCode !== 0) throw new Error(`npm run build failed:\n${build.stdout}\n${build.stderr}`);
  copyFileSync(join(projectRoot, "dist", "importd"), join(dir, "importd"));
  launch = { command: ["./importd"], cwd: dir, env: bareEnv };
}, 120_000);

afterAll(() => {
  running?.proc.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

test("the compiled binary, alone in an empty directory and without Bun, serves a whole import", async () => {
  expect(Bun.which("bun", { PATH: bareEnv.PATH })).toBeNull();
  expect(readdirSync(dir)).toEqual(["importd"]);
  const sizeMb = statSync(join(dir, "importd")).size / 1024 / 1024;

  const startedAt = performance.now();
  running = await spawnServer("./data", ["--workers", "2"], 30_000, launch);
  const startupMs = performance.now() - startedAt;
  console.log(`binary: ${sizeMb.toFixed(1)} MB; start-up to listening on an empty data directory: ${startupMs.toFixed(0)} ms`);

  // It created and migrated its database, and printed the first key.
  expect(existsSync(join(dir, "data", "importd.sqlite"))).toBe(true);
  const key = running.firstRunKey!;
  expect(key).toMatch(/^[0-9a-f]{64}_1$/);

  const base = `${running.url}/default`;
  await seedReferenceData(base, key);
  const job = await importAndWait(base, "assets", key, assets(500));
  expect(job.importJobStatus).toBe("Succeeded");
  expect(job.output).toMatchObject({ total: 500, applied: 500, rejected: 0 });
  const asset = await fetch(`${base}/v2/assets/${assets(1)[0]!.id}`, { headers: { "api-key": key } });
  expect(asset.status).toBe(200);
  // The OpenAPI document, and Swagger UI's own files embedded in the binary.
  expect((await fetch(`${running.url}/swagger/json`)).status).toBe(200);
  const ui = await fetch(`${running.url}/swagger/assets/swagger-ui-bundle.js`);
  expect(ui.status).toBe(200);
  expect(await ui.text()).toContain("SwaggerUIBundle");

  // A second job, then a clean stop: SIGTERM exits 0.
  const second = await importBatch(base, "assets", key, assets(10, 500));
  expect((await waitForJob(base, key, second.id)).importJobStatus).toBe("Succeeded");
  running.proc.kill("SIGTERM");
  expect(await running.proc.exited).toBe(0);
  running = undefined;

  const db = new Database(join(dir, "data", "importd.sqlite"), { readonly: true });
  expect(db.query("SELECT count(*) AS n FROM assets").get()).toEqual({ n: 510 });
  db.close();
}, 120_000);
