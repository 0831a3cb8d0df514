// Where COPY starts to pay on PostgreSQL: `npm run bench:pg-upsert`. The same batches of assets upserted both ways
// the store can (records as JSON in the merge statement; COPY into a temporary table, then the merge), into a fresh
// database, alternating the ways, each inside a transaction as a run's is: first into the empty table (all created),
// then the same again with every name changed (all updated). Prints the median times and the ratio COPY ÷ JSON per
// size; below 1, COPY is faster. store/postgres/records.ts's copyFromRecords comes from here (bench/history/performance-log.md, "The PostgreSQL driver").
import { drizzle } from "drizzle-orm/node-postgres";
import { Access } from "../src/access/access";
import { resourceByPath } from "../src/resources/registry";
import { onPool, openPool, Transaction } from "../src/store/postgres/connection";
import { PostgresRecords } from "../src/store/postgres/records";
import * as schema from "../src/store/postgres/schema";
import { PostgresStore } from "../src/store/postgres/store";
import { outboxRows } from "../src/webhooks/outbox";
import { asset } from "./lib/data";
import { stopPostgres, withFreshDatabase } from "./lib/postgres";
import { median } from "./lib/stats";

const sizes = (process.argv[2] ?? "1,10,100,300,600,1000,2000,5000,20000").split(",").map(Number);
const repeats = Number(process.argv[3] ?? 7);
const assets = resourceByPath("assets")!;

type Way = "json" | "copy";
const results: Array<{ records: number; way: Way; createMs: number; updateMs: number }> = [];

try {
  for (const records of sizes) {
    const times: Record<Way, { create: number[]; update: number[] }> = { json: { create: [], update: [] }, copy: { create: [], update: [] } };
    for (let repeat = 0; repeat < repeats; repeat++) {
      for (const way of (repeat % 2 === 0 ? ["json", "copy"] : ["copy", "json"]) as Way[]) {
        await withFreshDatabase(async (url) => {
          // Migrated and with an environment, as importd leaves it; then a pool of one connection, warmed up.
          const store = await PostgresStore.open(url, { outbox: outboxRows });
          const environmentId = (await new Access(store.access).createEnvironment("bench")).id;
          await store.close();
          const { pool } = openPool(url, { max: 1 });
          const upserts = new PostgresRecords(drizzle({ client: pool, schema }) as never, onPool(pool), way === "copy" ? 0 : Number.POSITIVE_INFINITY);
          const batch = Array.from({ length: records }, (_, i) => asset(i) as { id: string } & Record<string, unknown>);
          const timed = async (rows: typeof batch) => {
            const startedAt = performance.now();
            const run = await Transaction.begin(pool);
            const counts = await upserts.forRun(run, environmentId).upsert(assets, 1, rows);
            await run.commit();
            return { ms: performance.now() - startedAt, counts };
          };
          await timed([asset(records + 1) as { id: string } & Record<string, unknown>]);
          const created = await timed(batch);
          const updated = await timed(batch.map((record) => ({ ...record, name: `${record.name} (renamed)` })));
          if (created.counts.created !== records || updated.counts.updated !== records) throw new Error(`${way}: counts ${JSON.stringify([created.counts, updated.counts])}`);
          times[way].create.push(created.ms);
          times[way].update.push(updated.ms);
          await pool.end();
        });
      }
    }
    for (const way of ["json", "copy"] as Way[]) results.push({ records, way, createMs: median(times[way].create), updateMs: median(times[way].update) });
    const [json, copy] = results.slice(-2) as [(typeof results)[number], (typeof results)[number]];
    console.error(
      `${String(records).padStart(6)} records: JSON ${json.createMs.toFixed(1)} / ${json.updateMs.toFixed(1)} ms, COPY ${copy.createMs.toFixed(1)} / ${copy.updateMs.toFixed(1)} ms (created / updated); ` +
        `COPY ÷ JSON ${(copy.createMs / json.createMs).toFixed(2)} / ${(copy.updateMs / json.updateMs).toFixed(2)}`,
    );
  }
  console.log(JSON.stringify(results));
} finally {
  await stopPostgres();
}
