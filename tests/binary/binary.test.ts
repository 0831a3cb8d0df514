import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { importAndWait, importBatch, waitForJob } from "../helpers/api";
import { requireChromium, sharedBrowser } from "../helpers/browser";
import { signIn } from "../helpers/console";
import { projectRoot, spawnServer, type Launch, type ServerProcess } from "../helpers/process";
import { options } from "../../src/config";
import { assets, seedReferenceData } from "../helpers/records";
import { tempDir } from "../helpers/server";
import { requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { testSql } from "../helpers/sql";
import { copyFromRecords } from "../../src/store/postgres/records";

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

/** The ids of the assets an export of the environment gives, as NDJSON. */
async function exportedIds(base: string, key: string): Promise<string[]> {
  const response = await fetch(`${base}/v2/exports/assets`, { headers: { "api-key": key } });
  expect(response.status).toBe(200);
  const text = await response.text();
  expect(text.endsWith("\n")).toBe(true);
  return text.trimEnd().split("\n").map((line) => (JSON.parse(line) as { id: string }).id);
}

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
  // An export: its thread is another entrypoint inside the binary.
  expect(await exportedIds(base, key)).toHaveLength(500);
  // The OpenAPI document, and Swagger UI's own files embedded in the binary.
  expect((await fetch(`${running.url}/swagger/json`)).status).toBe(200);
  const ui = await fetch(`${running.url}/swagger/assets/swagger-ui-bundle.js`);
  expect(ui.status).toBe(200);
  expect(await ui.text()).toContain("SwaggerUIBundle");
  // The console's page and its bundled script and stylesheet, from inside the binary.
  const consolePage = await (await fetch(`${running.url}/console`)).text();
  const files = [...consolePage.matchAll(/(?:src|href)="(\/[^"]+\.(?:js|css))"/g)].map((match) => match[1]!);
  expect(files.length).toBe(2);
  for (const file of files) {
    const served = await fetch(`${running.url}${file}`);
    expect(served.status).toBe(200);
    expect((await served.text()).length).toBeGreaterThan(1000);
  }
  // A file imported from the console: its Web Worker is the binary's bundle, started on its own URL.
  if (requireChromium("a browser import from the compiled binary's console")) {
    writeFileSync(join(dir, "areas.csv"), ["id,name", ...Array.from({ length: 30 }, (_, n) => `area-${n},Area ${n}`)].join("\n"));
    const context = await (await sharedBrowser()).newContext();
    try {
      const page = await context.newPage();
      await signIn(page, running.url, key);
      await page.getByRole("link", { name: "Import" }).click();
      await page.getByLabel("Resource").selectOption("subareas");
      await page.getByLabel("File", { exact: true }).setInputFiles(join(dir, "areas.csv"));
      await page.getByRole("button", { name: "Check with a dry run" }).click();
      await page.getByRole("button", { name: "Apply: import the file" }).click({ timeout: 30_000 });
      const result = page.getByRole("region", { name: "Import result" });
      expect(await result.locator(".verdict").textContent({ timeout: 30_000 })).toBe("30 records: 30 applied (30 created, 0 updated, 0 unchanged), 0 rejected, in 1 job.");
    } finally {
      await context.close();
    }
    rmSync(join(dir, "areas.csv"));
  }

  // A second job, then a clean stop: SIGTERM exits 0.
  const second = await importBatch(base, "assets", key, assets(10, 500));
  expect((await waitForJob(base, key, second.id)).importJobStatus).toBe("Succeeded");

  // The client command is in the binary too.
  writeFileSync(join(dir, "more.ndjson"), assets(20, 1000).map((record) => JSON.stringify(record)).join("\n"));
  const imported = Bun.spawnSync(["./importd", "import", "more.ndjson", "--resource", "assets", "--base-url", base], {
    cwd: dir,
    env: { ...bareEnv, IMPORTD_API_KEY: key },
    stdout: "pipe",
    stderr: "pipe",
  });
  expect({ code: imported.exitCode, stdout: imported.stdout.toString() }).toEqual({ code: 0, stdout: expect.stringContaining("20 records, 20 applied, 0 rejected") });
  running.proc.kill("SIGTERM");
  expect(await running.proc.exited).toBe(0);
  running = undefined;

  const db = new Database(join(dir, "data", "importd.sqlite"), { readonly: true });
  expect(db.query("SELECT count(*) AS n FROM assets").get()).toEqual({ n: 530 });
  db.close();
}, 120_000);

test.skipIf(!requirePostgres("the compiled binary on PostgreSQL"))("the compiled binary serves an import on PostgreSQL too: its driver, COPY and worker threads are inside", async () => {
  const database = await freshPostgresDatabase();
  try {
    running = await spawnServer("./data-pg", ["--workers", "2", "--database-url", database.url], 30_000, launch);
    const key = running.firstRunKey!;
    const base = `${running.url}/default`;
    await seedReferenceData(base, key);
    // Big enough to go by COPY, and a small one by the JSON path.
    const big = await importAndWait(base, "assets", key, assets(copyFromRecords + 500));
    expect(big.output).toMatchObject({ applied: copyFromRecords + 500, rejected: 0 });
    expect((await importAndWait(base, "assets", key, assets(3, 50_000))).importJobStatus).toBe("Succeeded");
    expect(await exportedIds(base, key)).toHaveLength(copyFromRecords + 503);
    running.proc.kill("SIGTERM");
    expect(await running.proc.exited).toBe(0);
    running = undefined;
    const sql = testSql(database.url);
    expect(await sql`SELECT count(*)::int AS n FROM assets`).toEqual([{ n: copyFromRecords + 503 }]);
    await sql.end();
  } finally {
    await database.drop();
  }
}, 120_000);

test("the compiled binary takes scheduled backups (their thread is inside it), and its storage backup and restore make a directory a server serves", async () => {
  const server = await spawnServer("./data-backup", ["--workers", "1", "--backup-dir", "./backups", "--backup-every", "0.0003"], 30_000, launch);
  try {
    const key = server.firstRunKey!;
    await seedReferenceData(`${server.url}/default`, key);
    const taken = async () => (readdirSync(join(dir, "backups")) as string[]).filter((name) => /^importd-.*Z\.sqlite$/.test(name));
    for (let waited = 0; (await taken()).length === 0; waited += 100) {
      if (waited > 20_000) throw new Error(`no scheduled backup in 20 s: ${server.stderrLines.filter((line) => line.includes("backup")).join("\n")}`);
      await Bun.sleep(100);
    }
    const run = (args: string[]) => Bun.spawnSync(["./importd", ...args], { cwd: dir, env: bareEnv, stdout: "pipe", stderr: "pipe" });
    expect(run(["storage", "backup", "--data-dir", "./data-backup", "--to", "./by-hand.sqlite"]).exitCode).toBe(0);
    expect(run(["storage", "restore", "--from", "./by-hand.sqlite", "--data-dir", "./data-restored"]).exitCode).toBe(0);
    const restored = await spawnServer("./data-restored", ["--workers", "1"], 30_000, launch);
    try {
      expect((await fetch(`${restored.url}/default/v2/jobs`, { headers: { "api-key": key } })).status).toBe(200);
    } finally {
      restored.proc.kill("SIGKILL");
    }
  } finally {
    server.proc.kill("SIGKILL");
  }
}, 120_000);

test("deploy/importd.service: a dedicated user, its state directory, hardening, and a stop timeout above importd's own", () => {
  const unit = readFileSync(join(projectRoot, "deploy", "importd.service"), "utf8");
  const settings = new Map(
    unit
      .split("\n")
      .filter((line) => /^[A-Za-z]+=/.test(line))
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)] as const),
  );
  expect(settings.get("ExecStart")).toBe("/usr/local/bin/importd serve --data-dir /var/lib/importd");
  expect(settings.get("User")).toBe("importd");
  expect(settings.get("StateDirectory")).toBe("importd");
  for (const [key, value] of [["ProtectSystem", "strict"], ["NoNewPrivileges", "yes"], ["ProtectHome", "yes"], ["PrivateTmp", "yes"], ["CapabilityBoundingSet", ""]]) {
    expect(`${key}=${settings.get(key!)}`).toBe(`${key}=${value}`);
  }
  // Bun's JIT needs W+X memory: this one must stay off.
  expect(settings.get("MemoryDenyWriteExecute")).toBe("no");
  expect(Number(settings.get("TimeoutStopSec"))).toBeGreaterThan(options.shutdownTimeout.default);
  // Room for what the default body budget admits at once (two 100 MB imports peaked at 2.0 GB), reclaim before the kill.
  const gigabytes = (value: string | undefined) => Number(/^(\d+)G$/.exec(value ?? "")?.[1]);
  expect(options.bodyBudgetBytes.default).toBeLessThanOrEqual(2 * options.maxBodyBytes.default + 64 * 1024 * 1024);
  expect(gigabytes(settings.get("MemoryHigh"))).toBeGreaterThanOrEqual(3);
  expect(gigabytes(settings.get("MemoryMax"))).toBeGreaterThan(gigabytes(settings.get("MemoryHigh")));
  // Freed memory kept a second, as `npm start` keeps it (README, "Configuration"); every address, so HTTPS.
  expect(settings.get("Environment")).toBe("MIMALLOC_PURGE_DELAY=1000 IMPORTD_HOST=0.0.0.0");
  const scripts = (JSON.parse(readFileSync(join(projectRoot, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
  expect(scripts.start).toStartWith("MIMALLOC_PURGE_DELAY=${MIMALLOC_PURGE_DELAY:-1000} ");

  // systemd's own check, where the machine has it, with ExecStart pointing at the binary just built.
  const analyze = Bun.which("systemd-analyze");
  if (!analyze) return console.log("systemd-analyze is not installed here: the unit was not verified by systemd");
  const copy = join(dir, "importd.service");
  writeFileSync(copy, unit.replace("ExecStart=/usr/local/bin/importd", `ExecStart=${join(dir, "importd")}`));
  const verify = Bun.spawnSync([analyze, "verify", copy], { stdout: "pipe", stderr: "pipe" });
  expect(`${verify.stdout}${verify.stderr}`.trim()).toBe("");
  expect(verify.exitCode).toBe(0);
});
