import { afterAll, beforeAll, expect, test } from "bun:test";
import { rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { projectRoot } from "../helpers/process";
import { seedReferenceData } from "../helpers/records";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";

// A generated CSV (never committed) imported with `importd import`, the client's memory sampled while
// it runs. 50 MB in CI; `npm run import:long` does 1 GB (IMPORT_MB=1024).
const megabytes = Number(process.env.IMPORT_MB ?? 50);
const dir = tempDir("importd-large-");
const file = join(dir, "assets.csv");
let server: TestServer;
let rows = 0;

beforeAll(async () => {
  server = await startTestServer({ workers: 2 });
  await seedReferenceData(server.base, server.key);
  const writer = Bun.file(file).writer();
  writer.write("id,subAreaId,name,description,status,assetCategoryId,assetTypeId,shapeType,startPoint,endPoint,geolocation.linearReferenceStart,geolocation.linearReferenceEnd,geolocation.locationStart,geolocation.locationEnd,geolocation.locationUnit\n");
  let bytes = 0;
  while (bytes < megabytes * 1024 * 1024) {
    const n = rows++;
    const line = `BIG-${n},${n % 2 ? "north" : "south"},"Water main ${n}, between the mill and the station",Laid in ${1950 + (n % 70)},ACT,water,${n % 3 ? "pipe" : "valve"},LineString,${n % 100},${(n % 100) + 50.5},LR-${n % 997},LR-${(n % 997) + 1},${n % 50},${(n % 50) + 10},m\n`;
    writer.write(line);
    bytes += line.length;
  }
  await writer.end();
}, 600_000);

afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

test(`imports a ${megabytes} MB CSV with bounded client memory`, async () => {
  const started = performance.now();
  const proc = Bun.spawn([process.execPath, "src/main.ts", "import", file, "--resource", "assets", "--base-url", server.base], {
    cwd: projectRoot,
    env: { ...process.env, IMPORTD_API_KEY: server.key },
    stdout: "pipe",
    stderr: "ignore",
  });
  let peakKb = 0;
  const sampler = setInterval(async () => {
    const status = await Bun.file(`/proc/${proc.pid}/status`).text().catch(() => "");
    const rss = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0);
    peakKb = Math.max(peakKb, rss);
  }, 25);
  const [stdout, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  clearInterval(sampler);
  const seconds = (performance.now() - started) / 1000;
  const peakMb = peakKb / 1024;
  console.log(
    `import: ${(statSync(file).size / 1024 / 1024).toFixed(0)} MB CSV, ${rows} rows in ${seconds.toFixed(1)} s (${Math.round(rows / seconds)} records/s); client peak RSS ${peakMb.toFixed(0)} MB`,
  );
  expect(code).toBe(0);
  expect(stdout).toContain(`${rows} records, ${rows} applied, 0 rejected`);
  expect(Number((await server.query<{ n: number }>("SELECT count(*) AS n FROM assets WHERE id LIKE 'BIG-%'"))[0]!.n)).toBe(rows);
  // Streamed: a few chunks of 7.5 MB in flight, whatever the size of the file.
  expect(peakMb).toBeGreaterThan(0);
  expect(peakMb).toBeLessThan(400);
}, 3_600_000);
