import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { projectRoot, shippedEnv, importdCommand } from "../helpers/process";
import { seedReferenceData } from "../helpers/records";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";

// A generated CSV (never committed) imported with `importd import`, the client's memory sampled while it runs.
// 20 MB on every landing (three of the client's 7.5 MB chunks), 50 MB in `npm run test:long`; `npm run import:long`
// does 1 GB (IMPORT_MB=1024). One row in a hundred is bad, one kind after
// another, as people's files are: an id seen a few rows before (the later row must win), a row with a cell too
// few, a value the server refuses at once (400), a reference that does not exist (rejected by the job), and a
// cell with quotes, a delimiter and a line break inside (good, but hard to read).
const megabytes = Number(process.env.IMPORT_MB ?? 20);
const dir = tempDir("importd-large-");
const file = join(dir, "assets.csv");
let server: TestServer;
let rows = 0;
const bad = { repeated: 0, short: 0, invalid: 0, unknownReference: 0, quoted: 0 };
const rejectedLines: number[] = [];

beforeAll(async () => {
  server = await startTestServer({ workers: 2 });
  await seedReferenceData(server.base, server.key);
  const writer = Bun.file(file).writer();
  writer.write("id,subAreaId,name,description,status,assetCategoryId,assetTypeId,shapeType,startPoint,endPoint,geolocation.linearReferenceStart,geolocation.linearReferenceEnd,geolocation.locationStart,geolocation.locationEnd,geolocation.locationUnit\n");
  let bytes = 0;
  let line = 1;
  while (bytes < megabytes * 1024 * 1024) {
    const n = rows++;
    line++;
    const kind = n % 100 === 50 ? Math.floor(n / 100) % 5 : -1;
    const id = kind === 0 ? `BIG-${n - 3}` : `BIG-${n}`;
    const subArea = kind === 3 ? "nowhere" : n % 2 ? "north" : "south";
    const name = kind === 4 ? `"Main ""${n}"", east\nof the mill"` : `"Water main ${n}, between the mill and the station"`;
    const status = kind === 2 ? "A-STATUS-CODE-FAR-TOO-LONG" : "ACT";
    let text = `${id},${subArea},${name},Laid in ${1950 + (n % 70)},${status},water,${n % 3 ? "pipe" : "valve"},LineString,${n % 100},${(n % 100) + 50.5},LR-${n % 997},LR-${(n % 997) + 1},${n % 50},${(n % 50) + 10},m\n`;
    if (kind === 1) text = text.replace(/,m\n$/, "\n");
    if (kind === 0) bad.repeated++;
    else if (kind === 1) (bad.short++, rejectedLines.push(line));
    else if (kind === 2) (bad.invalid++, rejectedLines.push(line));
    else if (kind === 3) (bad.unknownReference++, rejectedLines.push(line));
    else if (kind === 4) (bad.quoted++, line++);
    writer.write(text);
    bytes += text.length;
  }
  await writer.end();
}, 600_000);

afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

test(`imports a ${megabytes} MB CSV with 1% bad rows of every kind: each bad row accounted for, bounded client memory`, async () => {
  const started = performance.now();
  const proc = Bun.spawn([...importdCommand, "import", file, "--resource", "assets", "--base-url", server.base], {
    cwd: projectRoot,
    env: { ...shippedEnv, IMPORTD_API_KEY: server.key },
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
  const rejected = bad.short + bad.invalid + bad.unknownReference;
  console.log(
    `import: ${(statSync(file).size / 1024 / 1024).toFixed(0)} MB CSV, ${rows} rows (${JSON.stringify(bad)}) in ${seconds.toFixed(1)} s ` +
      `(${Math.round(rows / seconds)} records/s); client peak RSS ${peakMb.toFixed(0)} MB`,
  );
  expect(code).toBe(1);
  expect(stdout).toContain(`${rows} records, ${rows - rejected} applied, ${rejected} rejected`);
  // Each repeated id was sent in a later request than the row three before it, unless a request happened to end between the two.
  const jobs = Number(/in (\d+) jobs/.exec(stdout)![1]);
  const moved = Number(/ (\d+) records had the id of a record shortly before them and were sent in a later request, so the later record wins\./.exec(stdout)?.[1]);
  expect(moved).toBeGreaterThanOrEqual(bad.repeated - jobs);
  expect(moved).toBeLessThanOrEqual(bad.repeated);
  // Every row but the repeated ids is a record of its own; a repeated id's later row wins.
  expect(Number((await server.query<{ n: number }>("SELECT count(*) AS n FROM assets WHERE id LIKE 'BIG-%'"))[0]!.n)).toBe(rows - bad.repeated - bad.invalid - bad.unknownReference - bad.short);
  const repeatedRow = 50 + 0 * 100; // the first row of kind 0 repeats the id of the row three before it
  expect((await server.query<{ description: string }>("SELECT description FROM assets WHERE id = ?", `BIG-${repeatedRow - 3}`))[0]!.description).toBe(`Laid in ${1950 + (repeatedRow % 70)}`);
  // The rejected file holds exactly the bad rows, by their line in the file.
  const written = readFileSync(join(dir, "assets.rejected.csv"), "utf8").trim().split("\n").slice(1).map((line) => Number(line.slice(line.lastIndexOf(",") + 1)));
  expect(written).toEqual(rejectedLines);
  // Streamed: a few chunks of 7.5 MB in flight, whatever the size of the file.
  expect(peakMb).toBeGreaterThan(0);
  expect(peakMb).toBeLessThan(400);
}, 3_600_000);
