import { afterAll, expect, test } from "bun:test";
import { chownSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { Access } from "../../src/access/access";
import { runNext } from "../../src/jobs/apply";
import { StorageFull } from "../../src/store/errors";
import { openPool, Transaction } from "../../src/store/postgres/connection";
import { faultCode } from "../../src/store/postgres/faults";
import { copyFromRecords } from "../../src/store/postgres/records";
import { PostgresStore } from "../../src/store/postgres/store";
import { outboxRows } from "../../src/webhooks/outbox";
import { fillTheDisk } from "../helpers/disk";
import { postgresServer, requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { assets, assetCategories, assetTypes, subAreas } from "../helpers/records";
import { tempDir } from "../helpers/server";
import { testSql } from "../helpers/sql";

// A COPY the server refuses must say so at once, with its SQLSTATE, and let go of what its transaction holds (the
// environment's lock of a run): with postgres.js such a COPY never settled.

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

if (requirePostgres("the PostgreSQL store's COPY")) {
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  test("a COPY whose last row breaks a constraint rejects with the SQLSTATE (it does not hang); its locks are free at once and the pool goes on", async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const admin = testSql(database.url);
    cleanups.push(() => admin.end());
    await admin`CREATE TABLE copied (id int PRIMARY KEY, name text)`;
    await admin`INSERT INTO copied VALUES (1, 'held')`;
    const { pool } = openPool(database.url, { max: 1 });
    cleanups.push(() => pool.end());

    const lines = [...Array.from({ length: 100_000 }, (_, i) => `${i + 2}\tn${i}\n`), "1\tduplicate\n"];
    const transaction = await Transaction.begin(pool);
    await transaction.query("SELECT id FROM copied WHERE id = 1 FOR UPDATE");
    const startedAt = performance.now();
    const refused = await transaction.copyIn("COPY copied (id, name) FROM STDIN", lines).catch((error) => error);
    // A bound against a hang (postgres.js 3.4 never rejected a failing COPY), not a speed: sending the 100,000 rows
    // took 1.08 s once on a loaded 2-core machine, against a bound of a second that failed CI.
    expect(performance.now() - startedAt).toBeLessThan(10_000);
    expect(faultCode(refused)).toBe("23505");
    await transaction.rollback();
    expect(await admin`SELECT id FROM copied WHERE id = 1 FOR UPDATE NOWAIT`).toEqual([{ id: 1 }]);
    expect(await admin`SELECT count(*)::int AS n FROM copied`).toEqual([{ n: 1 }]);
    expect((await pool.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
  });

  // The run's temporary table in a tablespace of its own on an 8 MB tmpfs, filled: PostgreSQL answers 53100 part way through
  // the COPY. Mounting needs root, which the CI machines give.
  test("a big run whose COPY meets a full disk rejects with StorageFull (53100) and lets go of its environment at once; with room again, it is taken over and applied", async () => {
    const mountPoint = tempDir("importd-pg-copyfull-");
    const mount = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mountPoint], { stderr: "pipe" });
    if (mount.exitCode !== 0) throw new Error(`this test mounts a small tmpfs and needs root: ${mount.stderr}`);
    cleanups.push(() => {
      Bun.spawnSync(["umount", "-l", mountPoint]);
      rmSync(mountPoint, { recursive: true, force: true });
    });
    const tablespaceDir = join(mountPoint, "tablespace");
    mkdirSync(tablespaceDir);
    const id = (flag: string) => Number(Bun.spawnSync(["id", flag, "postgres"]).stdout.toString());
    if (process.getuid?.() === 0) chownSync(tablespaceDir, id("-u"), id("-g"));
    const tablespace = `importd_copyfull_${process.pid}`;
    const server = await postgresServer();
    const database = await freshPostgresDatabase();
    const name = new URL(database.url).pathname.slice(1);
    await server.admin(async (sql) => {
      await sql.unsafe(`CREATE TABLESPACE "${tablespace}" LOCATION '${tablespaceDir}'`);
      // The fewest temporary buffers there may be (800 kB): the table goes to its tablespace soon.
      await sql.unsafe(`ALTER DATABASE "${name}" SET temp_tablespaces = '${tablespace}'`);
      await sql.unsafe(`ALTER DATABASE "${name}" SET temp_buffers = '800kB'`);
    });
    cleanups.push(() => server.admin((sql) => sql.unsafe(`DROP TABLESPACE IF EXISTS "${tablespace}"`)));
    cleanups.push(database.drop);
    const filler = join(mountPoint, "filler");
    fillTheDisk(filler);

    const store = await PostgresStore.open(database.url, { outbox: outboxRows });
    cleanups.push(() => store.close());
    const environmentId = (await new Access(store.access).createEnvironment("one")).id;
    const enqueue = async (type: string, records: unknown[]) => {
      const [enqueued] = await store.queue.enqueue([{ environmentId, type, recordCount: records.length, body: encode(records) }]);
      return enqueued!.conflict ? undefined : enqueued!.job;
    };
    await enqueue("SubArea", subAreas);
    await enqueue("AssetType", assetTypes);
    await enqueue("AssetCategory", assetCategories);
    await runNext(store.queue, environmentId, { token: crypto.randomUUID() });
    const count = copyFromRecords * 10;
    const job = (await enqueue("Asset", assets(count)))!;

    const token = crypto.randomUUID();
    const startedAt = performance.now();
    const refused = await runNext(store.queue, environmentId, { token }).catch((error) => error);
    expect(refused).toBeInstanceOf(StorageFull);
    expect(faultCode(refused)).toBe("53100");
    expect(performance.now() - startedAt).toBeLessThan(5_000);
    const admin = testSql(database.url);
    cleanups.push(() => admin.end());
    expect(await admin`SELECT id FROM environments WHERE id = ${environmentId} FOR NO KEY UPDATE NOWAIT`).toEqual([{ id: environmentId }]);
    expect((await store.jobs.find(environmentId, job.id, ""))!.status).toBe("Processing");

    rmSync(filler);
    const [applied] = (await runNext(store.queue, environmentId, { token: crypto.randomUUID(), takeOver: { token, countsAsAttempt: false } }))!;
    expect(applied).toMatchObject({ id: job.id, status: "Succeeded", applied: count });
  }, 60_000);
}
