import { Database } from "bun:sqlite";
import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { Access } from "../../src/access/access";
import { databaseFile } from "../../src/store/sqlite/database";
import { SqliteStore } from "../../src/store/sqlite/store";
import { outboxRows } from "../../src/webhooks/outbox";
import { importAndWait, terminal, type JobDocument } from "../helpers/api";
import { fromSourceWith, spawnServer, type ServerProcess } from "../helpers/process";
import { seededRandom } from "../helpers/random";
import { asset, assetCategories, assetTypes, subAreas } from "../helpers/records";
import { tempDir } from "../helpers/server";

// A stream of imports into three environments that share their ids, SIGKILLed again and again at random
// moments: while a body is sent, before and after its 202, while a job is validated, applied or committed.
// 15 rounds on every landing (each kind of kill several times); `npm run test:long` runs 50, and `npm run crash` runs
// more rounds (CRASH_ROUNDS) with another seed (CRASH_SEED).
const rounds = Number(process.env.CRASH_ROUNDS ?? 15);
const seed = Number(process.env.CRASH_SEED ?? 20261123);
const environments = ["alpha", "beta", "gamma"];
// Larger than any batch (its ids are distinct), small enough that batches overwrite each other often.
const idPool = 10_000;

const next = seededRandom(seed);
const pick = (n: number) => Math.floor(next() * n);

/** A valid batch must only ever get its 202; anything else fails the test (a lost connection does not). */
class WrongAnswer extends Error {}

type Batch = { marker: string; environment: string; records: Array<Record<string, unknown>> };
type Sent = Batch & { jobId?: number };

const dataDir = tempDir("importd-crash-");
// These kills are an operator's, at random moments, not a job's doing; but they can cut the same job's run
// short three times, and a job is given up after three (tests/durability/poison.test.ts). So this test gives
// jobs more attempts: what it checks is that nothing accepted is lost.
const launch = fromSourceWith({ IMPORTD_TEST_MAX_ATTEMPTS: "1000000" });
const spawn = (dir: string, args: string[]) => spawnServer(dir, args, 30_000, launch);
let server: ServerProcess | undefined;
afterAll(() => {
  server?.proc.kill("SIGKILL");
  rmSync(dataDir, { recursive: true, force: true });
});

/** A batch of distinct ids from the shared pool; `name` carries the batch's marker, the rest varies by it. */
function makeBatch(round: number, environment: string, index: number, size: number): Batch {
  const marker = `r${round}-${environment}-${index}`;
  const start = pick(idPool);
  const records = Array.from({ length: size }, (_, i) => {
    const n = (start + i) % idPool;
    return asset(n, { id: `ID-${n}`, name: marker, status: `S${round % 100}`, startPoint: round, endPoint: round + i });
  });
  return { marker, environment, records };
}

test(`SIGKILL at ${rounds} random moments of a stream of imports: nothing accepted is lost, nothing is half-applied, the last write wins`, async () => {
  const keys = new Map<string, string>();
  const store = SqliteStore.open(dataDir, { outbox: outboxRows });
  const access = new Access(store.access);
  for (const environment of environments) {
    await access.createEnvironment(environment);
    keys.set(environment, await access.createKey(environment));
  }
  await store.close();

  server = await spawn(dataDir, ["--workers", "2", "--auth-failures-per-minute", "0"]);
  for (const environment of environments) {
    const base = `${server.url}/${environment}`;
    for (const [resource, records] of [["subareas", subAreas], ["assettypes", assetTypes], ["assetcategories", assetCategories]] as const) {
      expect((await importAndWait(base, resource, keys.get(environment)!, records as unknown[])).importJobStatus).toBe("Succeeded");
    }
  }

  const sent: Sent[] = [];
  const kills: Record<string, number> = { "after a random delay": 0, "at once after a 202": 0, "while a job is Processing": 0 };
  for (let round = 0; round < rounds; round++) {
    server ??= await spawn(dataDir, ["--workers", "2", "--auth-failures-per-minute", "0"]);
    const running = server;
    // Per environment, one or two batches in order: small ones and large ones (up to ~3 MB).
    const posts = environments.flatMap((environment) =>
      Array.from({ length: 1 + pick(2) }, (_, index) => makeBatch(round, environment, index, next() < 0.3 ? 4000 + pick(4000) : 1 + pick(60))),
    );
    const inFlight = environments.map(async (environment) => {
      for (const batch of posts.filter((post) => post.environment === environment)) {
        const entry: Sent = { ...batch };
        sent.push(entry);
        try {
          const response = await fetch(`${running.url}/${environment}/v2/assets`, {
            method: "POST",
            headers: { "content-type": "application/json", "api-key": keys.get(environment)! },
            body: JSON.stringify(batch.records),
          });
          if (response.status !== 202) throw new WrongAnswer(`${response.status}: ${await response.text()}`);
          entry.jobId = ((await response.json()) as JobDocument).id;
        } catch (error) {
          if (error instanceof WrongAnswer) throw error;
          return; // Killed before the answer: the batch may or may not have been stored, and nothing is owed.
        }
      }
    });

    const mode = pick(3);
    if (mode === 0) {
      await Bun.sleep(pick(500));
      kills["after a random delay"]!++;
    } else if (mode === 1) {
      await Promise.race([Promise.all(inFlight), Bun.sleep(3000)]);
      kills["at once after a 202"]!++;
    } else {
      const deadline = Date.now() + 3000;
      const first = environments[0]!;
      while (Date.now() < deadline) {
        const page = await fetch(`${running.url}/${first}/v2/jobs?status=Processing&limit=1`, { headers: { "api-key": keys.get(first)! } })
          .then((response) => response.json() as Promise<{ items: unknown[] }>)
          .catch(() => ({ items: [] }));
        if (page.items.length > 0) break;
        await Bun.sleep(5);
      }
      kills["while a job is Processing"]!++;
    }
    running.proc.kill("SIGKILL");
    await running.proc.exited;
    await Promise.all(inFlight);
    server = undefined;
  }

  // The last start: everything accepted must finish.
  server = await spawn(dataDir, ["--workers", "2", "--auth-failures-per-minute", "0"]);
  const acked = sent.filter((entry) => entry.jobId !== undefined);
  for (const entry of acked) {
    const job = await importAndWaitFor(server.url, entry.environment, keys.get(entry.environment)!, entry.jobId!);
    expect({ job: entry.jobId, status: job.importJobStatus }).toEqual({ job: entry.jobId, status: "Succeeded" });
    expect(job.recordCount).toBe(entry.records.length);
  }
  server.proc.kill("SIGKILL");
  await server.proc.exited;
  server = undefined;

  const file = new Database(databaseFile(dataDir), { readonly: true });
  expect(file.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
  expect(file.query("SELECT count(*) AS n FROM jobs WHERE status IN ('Pending', 'Processing')").get()).toEqual({ n: 0 });
  expect(file.query("SELECT count(*) AS n FROM job_payloads").get()).toEqual({ n: 0 });

  const byMarker = new Map(sent.map((entry) => [entry.marker, entry]));
  let checked = 0;
  for (const environment of environments) {
    const rows = file
      .query("SELECT a.id, a.name, a.status, a.start_point AS startPoint, a.end_point AS endPoint, a.last_job_id AS lastJobId FROM assets a JOIN environments e ON e.id = a.environment_id WHERE e.slug = ?")
      .all(environment) as Array<{ id: string; name: string; status: string; startPoint: number; endPoint: number; lastJobId: number }>;
    const current = new Map(rows.map((row) => [row.id, row]));
    // Every record holds, whole, what one batch of its own environment said (no torn or foreign record).
    for (const row of rows) {
      const batch = byMarker.get(row.name);
      expect(batch?.environment).toBe(environment);
      const written = batch!.records.find((record) => record.id === row.id)!;
      expect({ status: row.status, startPoint: row.startPoint, endPoint: row.endPoint }).toEqual({ status: written.status, startPoint: written.startPoint, endPoint: written.endPoint } as never);
      if (batch!.jobId !== undefined) expect(row.lastJobId).toBe(batch!.jobId);
      checked++;
    }
    // Every acknowledged job was applied whole, and the last job (in acceptance order) that wrote an id wins.
    for (const entry of acked.filter((candidate) => candidate.environment === environment)) {
      for (const record of entry.records) {
        const row = current.get(record.id as string);
        expect(row).toBeDefined();
        expect(row!.lastJobId).toBeGreaterThanOrEqual(entry.jobId!);
      }
    }
  }
  file.close();
  // Fewer rounds must not mean a kind of kill never tried.
  if (rounds >= 15) expect(Object.entries(kills).filter(([, count]) => count === 0)).toEqual([]);
  console.log(
    `crash: seed ${seed}, ${rounds} kill points (${Object.entries(kills).map(([how, count]) => `${count} ${how}`).join(", ")}); ` +
      `${sent.length} batches sent, ${acked.length} acknowledged, all Succeeded; ${checked} records checked; 0 lost`,
  );
}, Math.max(600_000, rounds * 5_000));

async function importAndWaitFor(url: string, environment: string, key: string, jobId: number): Promise<JobDocument> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const response = await fetch(`${url}/${environment}/v2/status/${jobId}`, { headers: { "api-key": key } });
    expect(response.status).toBe(200);
    const job = (await response.json()) as JobDocument;
    if (terminal.has(job.importJobStatus)) return job;
    if (Date.now() > deadline) throw new Error(`job ${jobId} still ${job.importJobStatus}`);
    await Bun.sleep(20);
  }
}
