// Where a big job's upsert goes on PostgreSQL (row pg 1a, issue 45): 100k assets upserted by the store into an empty
// table, in a transaction as a run's is, each statement of the run timed (tombstones, the staging table, COPY, the
// merge, the commit), and the COPY text built alone, cold and warm, without the database.
// Usage: bun bench/pg-copy-phases.ts [records] [repeats]   Prints the medians, and one JSON line.
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

const records = Number(process.argv[2] ?? 100_000);
const repeats = Number(process.argv[3] ?? 5);
const assets = resourceByPath("assets")!;

// Each statement of the run on the clock, by the first word of its SQL.
const spent = new Map<string, number>();
const clocked = <A extends unknown[], R>(name: (...args: A) => string, fn: (...args: A) => Promise<R>) =>
  async function (this: unknown, ...args: A): Promise<R> {
    const startedAt = performance.now();
    try {
      return await fn.apply(this, args);
    } finally {
      const key = name(...args);
      spent.set(key, (spent.get(key) ?? 0) + performance.now() - startedAt);
    }
  };
const sqlOf = (query: unknown) => (typeof query === "string" ? query : (query as { text: string }).text);
const kind = (query: unknown) => {
  const text = sqlOf(query);
  if (text.startsWith("CREATE TEMP")) return "staging";
  if (text.startsWith("WITH written")) return "merge";
  if (text === "COMMIT") return "commit";
  if (/tombstone/i.test(text)) return "tombstones";
  return text.slice(0, 20);
};
Transaction.prototype.query = clocked(kind, Transaction.prototype.query) as never;
Transaction.prototype.copyIn = clocked<Parameters<Transaction["copyIn"]>, void>(() => "copy", Transaction.prototype.copyIn) as never;

const phases: Array<Record<string, number>> = [];
const build: { coldMs: number; warmMs: number[] } = { coldMs: 0, warmMs: [] };
try {
  const batch = Array.from({ length: records }, (_, i) => asset(i) as { id: string } & Record<string, unknown>);
  for (let repeat = 0; repeat < repeats; repeat++) {
    await withFreshDatabase(async (url) => {
      const store = await PostgresStore.open(url, { outbox: outboxRows });
      const environmentId = (await new Access(store.access).createEnvironment("bench")).id;
      await store.close();
      const { pool } = openPool(url, { max: 1 });
      const upserts = new PostgresRecords(drizzle({ client: pool, schema }) as never, onPool(pool));
      // A first small job, as importd's pool has made its connection and staging table before row pg 1a's.
      const warm = await Transaction.begin(pool);
      await upserts.forRun(warm, environmentId).upsert(assets, 1, batch.slice(0, 2_000).map((record) => ({ ...record, id: `w${record.id}` })));
      await warm.commit();
      spent.clear();
      const startedAt = performance.now();
      const run = await Transaction.begin(pool);
      const counts = await upserts.forRun(run, environmentId).upsert(assets, 2, batch);
      await run.commit();
      const totalMs = performance.now() - startedAt;
      if (counts.created !== records) throw new Error(`counts ${JSON.stringify(counts)}`);
      phases.push({ totalMs, ...Object.fromEntries(spent) });
      await pool.end();
    });
  }
  // The text alone: the first build in this process is cold only if no COPY came before, so a fresh process does it.
  const table = (new PostgresRecords(undefined as never, undefined as never) as never as { of: (r: unknown) => { copyRows: (r: unknown) => Iterable<{ length: number }> } }).of(assets);
  for (let repeat = 0; repeat < repeats; repeat++) {
    const startedAt = performance.now();
    let chars = 0;
    for (const chunk of table.copyRows(batch)) chars += chunk.length;
    build.warmMs.push(performance.now() - startedAt);
    if (chars === 0) throw new Error("no text");
  }
} finally {
  await stopPostgres();
}
const medians = Object.fromEntries(Object.keys(phases[0]!).map((key) => [key, Math.round(median(phases.map((run) => run[key] ?? 0)) * 10) / 10]));
console.error(`upsert of ${records} assets into an empty table, medians of ${repeats} (ms): ${JSON.stringify(medians)}`);
console.error(`COPY data alone (ms), runs after the upserts: ${build.warmMs.map((ms) => ms.toFixed(1)).join(" ")}`);
console.log(JSON.stringify({ records, medians, phases, textMs: build.warmMs }));
