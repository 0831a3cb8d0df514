import { Database } from "bun:sqlite";
import { afterAll, expect, test } from "bun:test";
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { Access } from "../../src/access/access";
import { databaseFile } from "../../src/store/sqlite/database";
import { SqliteStore } from "../../src/store/sqlite/store";
import { outboxRows } from "../../src/webhooks/outbox";
import { importAndWait, terminal, type JobDocument } from "../helpers/api";
import { withTestHooks, spawnServer, type ServerProcess } from "../helpers/process";
import { seededRandom } from "../helpers/random";
import { asset, assetCategories, assetTypes, subAreas } from "../helpers/records";
import { tempDir } from "../helpers/server";
import { until } from "../helpers/until";

// A stream of imports, delete jobs and now and then a sync (opened, joined by an import or two, completed) into three
// environments that share their ids, SIGKILLed again and again at random moments: while a body is sent, before and
// after its 202, while a job is validated, applied or committed.
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

const Operation = { Upsert: "upsert", Delete: "delete", SyncCompletion: "syncCompletion" } as const;
/** A sync's imports; its id once its POST /v2/syncs was answered (a sync whose answer was lost is never joined). */
type Sync = { id?: number; imports: Batch[] };
type Batch = { operation: typeof Operation.Upsert; marker: string; environment: string; records: Array<Record<string, unknown>>; sync?: Sync };
type Deletion = { operation: typeof Operation.Delete; marker: string; environment: string; ids: string[] };
type Completion = { operation: typeof Operation.SyncCompletion; marker: string; environment: string; sync: Sync };
/** `jobId` once its 202 came; a completion's also when its answer was lost but the sync's jobs show it was queued. */
type Sent = (Batch | Deletion | Completion) & { jobId?: number };

const dataDir = tempDir("importd-crash-");
// These kills are an operator's, at random moments, not a job's doing; but they can cut the same job's run
// short three times, and a job is given up after three (tests/durability/poison.test.ts). So this test gives
// jobs more attempts: what it checks is that nothing accepted is lost.
const launch = withTestHooks({ IMPORTD_TEST_MAX_ATTEMPTS: "1000000" });
// Scheduled backups every 0.5 s beside the stream, so that a kill can land while one is written (DECISIONS 14: the
// data directory untouched, nothing half-written at a backup's name).
const backupDir = tempDir("importd-crash-backups-");
const backupName = /^importd-[\dT.]+Z\.sqlite$/;
const spawn = (dir: string, args: string[]) => spawnServer(dir, [...args, "--backup-dir", backupDir, "--backup-every", "0.00015", "--backup-keep", "3"], 30_000, launch);
let server: ServerProcess | undefined;
afterAll(() => {
  server?.proc.kill("SIGKILL");
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(backupDir, { recursive: true, force: true });
});

/** A batch of distinct ids from the shared pool; `name` carries the batch's marker, the rest varies by it. */
function makeBatch(round: number, environment: string, index: number, size: number): Batch {
  const marker = `r${round}-${environment}-${index}`;
  const start = pick(idPool);
  const records = Array.from({ length: size }, (_, i) => {
    const n = (start + i) % idPool;
    return asset(n, { id: `ID-${n}`, name: marker, status: `S${round % 100}`, startPoint: round, endPoint: round + i });
  });
  return { operation: Operation.Upsert, marker, environment, records };
}

/** A delete job of a run of ids that an earlier batch of the environment sent (most still there), and of one beyond it. */
function makeDeletion(round: number, environment: string, index: number, earlier: Batch[]): Deletion {
  const batch = earlier[pick(earlier.length)]!;
  const from = pick(batch.records.length);
  const ids = batch.records.slice(from, from + 1 + pick(500)).map((record) => record.id as string);
  return { operation: Operation.Delete, marker: `r${round}-${environment}-${index}`, environment, ids: [...ids, `ID-${pick(idPool)}`] };
}

/** The steps one environment sends in a round: one or two imports or deletes, or now and then a sync's imports and completion. */
function makeSteps(round: number, environment: string, earlier: Batch[]): Sent[] {
  const size = () => (next() < 0.3 ? 4000 + pick(4000) : 1 + pick(60));
  if (next() < 0.1) {
    const sync: Sync = { imports: [] };
    sync.imports = Array.from({ length: 1 + pick(2) }, (_, index) => ({ ...makeBatch(round, environment, index, size()), sync }));
    return [...sync.imports, { operation: Operation.SyncCompletion, marker: `r${round}-${environment}-completion`, environment, sync }];
  }
  return Array.from({ length: 1 + pick(2) }, (_, index) =>
    earlier.length > 0 && next() < 0.3 ? makeDeletion(round, environment, index, earlier) : makeBatch(round, environment, index, size()),
  );
}

test(`SIGKILL at ${rounds} random moments of a stream of imports, deletes and syncs: nothing accepted is lost, nothing is half-applied, the last write or delete wins`, async () => {
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
  const kills: Record<string, number> = { "after a random delay": 0, "at once after a 202": 0, "while a job is Processing": 0, "while a backup is written": 0 };
  for (let round = 0; round < rounds; round++) {
    server ??= await spawn(dataDir, ["--workers", "2", "--auth-failures-per-minute", "0"]);
    const running = server;
    // Per environment, in order: imports small and large (up to ~3 MB), deletes, a sync.
    const posts = environments.flatMap((environment) =>
      makeSteps(round, environment, sent.filter((entry): entry is Batch & Sent => entry.environment === environment && entry.operation === Operation.Upsert)),
    );
    const inFlight = environments.map(async (environment) => {
      const headers = { "content-type": "application/json", "api-key": keys.get(environment)! };
      for (const entry of posts.filter((post) => post.environment === environment)) {
        sent.push(entry);
        try {
          const sync = entry.operation === Operation.Delete ? undefined : entry.sync;
          if (sync && sync.id === undefined) {
            const opened = await fetch(`${running.url}/${environment}/v2/syncs`, { method: "POST", headers, body: JSON.stringify({ resource: "assets" }) });
            if (opened.status !== 201) throw new WrongAnswer(`${opened.status}: ${await opened.text()}`);
            sync.id = ((await opened.json()) as { id: number }).id;
          }
          const [path, body] =
            entry.operation === Operation.Upsert
              ? [sync ? `assets?sync=${sync.id}` : "assets", JSON.stringify(entry.records)]
              : entry.operation === Operation.Delete
                ? ["deletions/assets", JSON.stringify(entry.ids)]
                : [`syncs/${sync!.id}/complete?maxDeletePercent=100`, undefined];
          const response = await fetch(`${running.url}/${environment}/v2/${path}`, { method: "POST", headers: body ? headers : { "api-key": headers["api-key"] }, body });
          if (response.status !== 202) throw new WrongAnswer(`${response.status}: ${await response.text()}`);
          entry.jobId = ((await response.json()) as JobDocument).id;
        } catch (error) {
          if (error instanceof WrongAnswer) throw error;
          return; // Killed before the answer: the batch may or may not have been stored, and nothing is owed.
        }
      }
    });

    // Each kind of kill in turn, so that every one is tried whatever the random draws.
    const mode = round % 4;
    if (mode === 0) {
      await Bun.sleep(pick(500));
      kills["after a random delay"]!++;
    } else if (mode === 1) {
      await Promise.race([Promise.all(inFlight), Bun.sleep(3000)]);
      kills["at once after a 202"]!++;
    } else if (mode === 3) {
      const deadline = Date.now() + 5000;
      const writing = () => readdirSync(backupDir).some((name) => name.includes(".importd-partial-"));
      while (Date.now() < deadline && !writing()) await Bun.sleep(1);
      kills[writing() ? "while a backup is written" : "after a random delay"]!++;
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

  // The last start: everything accepted must finish. A completion whose answer was lost was accepted if its sync's
  // jobs show it (it takes no Idempotency-Key; `importd import --mirror` looks for it the same way), and is checked
  // like an acknowledged one.
  server = await spawn(dataDir, ["--workers", "2", "--auth-failures-per-minute", "0"]);
  for (const entry of sent) {
    if (entry.operation !== Operation.SyncCompletion || entry.jobId !== undefined || entry.sync.id === undefined) continue;
    const response = await fetch(`${server.url}/${entry.environment}/v2/syncs/${entry.sync.id}`, { headers: { "api-key": keys.get(entry.environment)! } });
    entry.jobId = ((await response.json()) as { jobs: Array<{ id: number; operation: string }> }).jobs.find((job) => job.operation === Operation.SyncCompletion)?.id;
  }
  const acked = sent.filter((entry) => entry.jobId !== undefined);
  let deletedByJobs = 0;
  for (const entry of acked) {
    const job = (await importAndWaitFor(server.url, entry.environment, keys.get(entry.environment)!, entry.jobId!)) as JobDocument & { output: { deleted?: number; notFound?: number } };
    expect({ job: entry.jobId, status: job.importJobStatus, rejected: job.output!.rejected }).toEqual({ job: entry.jobId, status: "Succeeded", rejected: 0 });
    if (entry.operation === Operation.Upsert) expect(job.recordCount).toBe(entry.records.length);
    deletedByJobs += job.output!.deleted ?? 0;
    // A delete applied whole: each of its ids deleted or not found, none left out.
    if (entry.operation === Operation.Delete) expect([job.recordCount, job.output!.deleted! + job.output!.notFound!]).toEqual([entry.ids.length, entry.ids.length]);
  }
  // The last server's schedule takes a backup whole, whatever the kills left beside it (each round's server may have
  // been killed before its first backup ended, on a busy machine).
  await until(() => readdirSync(backupDir).filter((name) => backupName.test(name)), { what: "a whole scheduled backup after the kills", holds: (names) => names.length > 0, deadlineMs: 30_000 });
  server.proc.kill("SIGKILL");
  await server.proc.exited;
  server = undefined;

  const file = new Database(databaseFile(dataDir), { readonly: true });
  expect(file.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
  // Whatever a kill cut short stays under its partial name; every file at a backup's own name is whole.
  const backups = readdirSync(backupDir).filter((name) => backupName.test(name));
  for (const name of backups) {
    const backup = new Database(join(backupDir, name), { readonly: true });
    expect({ name, check: backup.query("PRAGMA integrity_check").get() }).toEqual({ name, check: { integrity_check: "ok" } });
    backup.close();
  }
  expect(file.query("SELECT count(*) AS n FROM jobs WHERE status IN ('Pending', 'Processing')").get()).toEqual({ n: 0 });
  expect(file.query("SELECT count(*) AS n FROM job_payloads").get()).toEqual({ n: 0 });

  const byMarker = new Map(sent.map((entry) => [entry.marker, entry]));
  const jobs = new Map(
    (file.query("SELECT j.id, j.operation, e.slug AS environment FROM jobs j JOIN environments e ON e.id = j.environment_id").all() as Array<{ id: number; operation: string; environment: string }>).map(
      ({ id, ...job }) => [id, job],
    ),
  );
  let checked = 0;
  let deleted = 0;
  for (const environment of environments) {
    const rows = file
      .query("SELECT a.id, a.name, a.status, a.start_point AS startPoint, a.end_point AS endPoint, a.last_job_id AS lastJobId FROM assets a JOIN environments e ON e.id = a.environment_id WHERE e.slug = ?")
      .all(environment) as Array<{ id: string; name: string; status: string; startPoint: number; endPoint: number; lastJobId: number }>;
    const current = new Map(rows.map((row) => [row.id, row]));
    const tombstones = new Map(
      (file.query("SELECT t.id, t.job_id AS jobId FROM tombstones t JOIN environments e ON e.id = t.environment_id WHERE e.slug = ? AND t.resource = 'assets'").all(environment) as Array<{ id: string; jobId: number }>).map(
        (row) => [row.id, row.jobId],
      ),
    );
    const mine = sent.filter((entry) => entry.environment === environment);
    const ackedHere = acked.filter((entry) => entry.environment === environment);
    // Every record holds, whole, what one batch of its own environment said (no torn or foreign record).
    for (const row of rows) {
      const batch = byMarker.get(row.name);
      expect([batch?.environment, batch?.operation]).toEqual([environment, Operation.Upsert]);
      const written = (batch as Batch & Sent).records.find((record) => record.id === row.id)!;
      expect({ status: row.status, startPoint: row.startPoint, endPoint: row.endPoint }).toEqual({ status: written.status, startPoint: written.startPoint, endPoint: written.endPoint } as never);
      if (batch!.jobId !== undefined) expect(row.lastJobId).toBe(batch!.jobId);
      // Importing a deleted id again ends its tombstone.
      expect(tombstones.get(row.id)).toBeUndefined();
      checked++;
    }
    // Every acknowledged import was applied whole, and the last job (in acceptance order) that wrote or deleted an id
    // wins: the record is there, written by it or a later job, or gone, deleted by a later job.
    for (const entry of ackedHere) {
      if (entry.operation !== Operation.Upsert) continue;
      for (const record of entry.records) {
        const row = current.get(record.id as string);
        if (row) expect(row.lastJobId).toBeGreaterThanOrEqual(entry.jobId!);
        else expect({ id: record.id, deletedAfter: (tombstones.get(record.id as string) ?? 0) > entry.jobId! }).toEqual({ id: record.id, deletedAfter: true });
      }
    }
    // A delete is applied whole or not yet, in order: once applied, none of its ids is left unless a later job wrote
    // it again. An unacknowledged delete that was applied is known by its tombstones: some delete this environment sent
    // names all of them, and is applied whole.
    const goneOrWrittenAfter = (ids: string[], jobId: number) => ids.every((id) => (current.get(id)?.lastJobId ?? Infinity) > jobId);
    for (const entry of ackedHere) {
      if (entry.operation === Operation.Delete) expect({ job: entry.jobId, whole: goneOrWrittenAfter(entry.ids, entry.jobId!) }).toEqual({ job: entry.jobId, whole: true });
    }
    // A completion deleted every record its sync did not send: whatever is older than it was sent by its sync. Exact
    // here: an environment sends nothing else between a sync's opening and its completion, so no job outside the
    // sync wrote a record after it opened.
    for (const entry of ackedHere) {
      if (entry.operation !== Operation.SyncCompletion) continue;
      const sent = new Set(entry.sync.imports.flatMap((batch) => batch.records.map((record) => record.id as string)));
      expect(rows.filter((row) => row.lastJobId < entry.jobId! && !sent.has(row.id)).map((row) => row.id)).toEqual([]);
    }
    // Every tombstone names a job of this environment that deleted that id: a delete that names it, or a completion
    // whose sync did not send it.
    const byJob = Map.groupBy(tombstones.keys(), (id) => tombstones.get(id)!);
    for (const [jobId, ids] of byJob) {
      const entry = ackedHere.find((candidate) => candidate.jobId === jobId);
      if (entry?.operation === Operation.SyncCompletion) {
        const sent = new Set(entry.sync.imports.flatMap((batch) => batch.records.map((record) => record.id as string)));
        expect(ids.filter((id) => sent.has(id))).toEqual([]);
      } else if (entry) {
        expect([entry.operation, ids.filter((id) => !(entry as Deletion).ids.includes(id))]).toEqual([Operation.Delete, []]);
      } else {
        expect(jobs.get(jobId)).toEqual({ operation: Operation.Delete, environment });
        const candidates = mine.filter((candidate): candidate is Deletion & Sent => candidate.operation === Operation.Delete && candidate.jobId === undefined && ids.every((id) => candidate.ids.includes(id)));
        expect({ job: jobId, whole: candidates.some((candidate) => goneOrWrittenAfter(candidate.ids, jobId)) }).toEqual({ job: jobId, whole: true });
      }
      deleted += ids.length;
    }
  }
  file.close();
  // Fewer rounds must not mean a kind of kill never tried.
  if (rounds >= 15) expect(Object.entries(kills).filter(([, count]) => count === 0)).toEqual([]);
  const count = (entries: Sent[], operation: Sent["operation"]) => entries.filter((entry) => entry.operation === operation).length;
  console.log(
    `crash: seed ${seed}, ${rounds} kill points (${Object.entries(kills).map(([how, count]) => `${count} ${how}`).join(", ")}); ` +
      `${sent.length} jobs sent (${count(sent, Operation.Delete)} deletes, ${count(sent, Operation.SyncCompletion)} sync completions), ` +
      `${acked.length} accepted (${count(acked, Operation.Delete)} deletes, ${count(acked, Operation.SyncCompletion)} sync completions), all Succeeded, ${deletedByJobs} records deleted; ` +
      `${checked} records and ${deleted} tombstones checked; 0 lost`,
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
