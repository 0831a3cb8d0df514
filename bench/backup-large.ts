// `bun bench/backup-large.ts [GB]`, by hand (not in CI): how `importd storage backup` does on a large appliance
// (default 1 GB) while a stream of imports runs, and what Database.serialize() (the other way bun:sqlite offers to copy a
// database) would cost. Figures in docs/operations/backup.md.
import { Database } from "bun:sqlite";
import { rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { databaseFile } from "../src/store/sqlite/database";
import { asset, seedReferenceData } from "../tests/helpers/records";
import { importAndWait } from "../tests/helpers/api";
import { importd, spawnServer } from "../tests/helpers/process";
import { tempDir } from "../tests/helpers/server";

const targetBytes = Number(process.argv[2] ?? 1) * 1024 ** 3;
const dir = tempDir("importd-backup-bench-");
const dataDir = join(dir, "data");
const mb = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(0)} MB`;
const say = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);

try {
  // A first server makes the schema, the environment and a batch of 20,000 assets the normal way.
  let server = await spawnServer(dataDir, ["--workers", "2"]);
  const key = server.firstRunKey!;
  const base = `${server.url}/default`;
  await seedReferenceData(base, key);
  await importAndWait(base, "assets", key, Array.from({ length: 20_000 }, (_, i) => asset(i)));
  server.proc.kill("SIGTERM");
  await server.proc.exited;

  // Then doubled in SQL, with distinct ids, until the file is large enough.
  const db = new Database(databaseFile(dataDir));
  const columns = (db.query("PRAGMA table_info(assets)").all() as Array<{ name: string }>).map((column) => column.name);
  const selected = columns.map((name) => (name === "id" ? `id || '-' || ?1` : name)).join(", ");
  for (let round = 1; statSync(databaseFile(dataDir)).size < targetBytes; round++) {
    db.query(`INSERT INTO assets (${columns.join(", ")}) SELECT ${selected} FROM assets`).run(String(round));
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    say(`round ${round}: ${mb(statSync(databaseFile(dataDir)).size)}`);
  }
  const { rows } = db.query("SELECT count(*) AS rows FROM assets").get() as { rows: number };
  db.close();
  say(`database: ${mb(statSync(databaseFile(dataDir)).size)}, ${rows.toLocaleString("en-US")} assets`);

  server = await spawnServer(dataDir, ["--workers", "2"]);
  const post = async (n: number) => {
    const started = performance.now();
    const response = await fetch(`${server.url}/default/v2/assets`, {
      method: "POST",
      headers: { "content-type": "application/json", "api-key": key },
      body: JSON.stringify(Array.from({ length: 100 }, (_, i) => asset(5_000_000 + ((n * 100 + i) % 200_000)))),
    });
    await response.arrayBuffer();
    return { status: response.status, ms: performance.now() - started };
  };
  const wal = `${databaseFile(dataDir)}-wal`;
  const walSize = () => {
    try {
      return statSync(wal).size;
    } catch {
      return 0;
    }
  };
  const latencies = { before: [] as number[], during: [] as number[], after: [] as number[] };
  const statuses = new Map<number, number>();
  let phase: keyof typeof latencies = "before";
  let walMax = 0;
  let stop = false;
  const stream = (async () => {
    for (let n = 0; !stop; n++) {
      const { status, ms } = await post(n);
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      latencies[phase].push(ms);
      walMax = Math.max(walMax, walSize());
    }
  })();
  await Bun.sleep(5_000);
  phase = "during";
  const walBefore = walSize();
  const started = performance.now();
  const backup = await importd(["storage", "backup", "--data-dir", dataDir, "--to", join(dir, "backup.sqlite")]);
  const seconds = (performance.now() - started) / 1000;
  const walAtEnd = walSize();
  phase = "after";
  await Bun.sleep(5_000);
  stop = true;
  await stream;
  if (backup.code !== 0) throw new Error(backup.stderr);
  const stats = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!.toFixed(0);
    return `${values.length} imports, p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${sorted.at(-1)!.toFixed(0)} ms`;
  };
  say(`backup: ${seconds.toFixed(1)} s for ${mb(statSync(join(dir, "backup.sqlite")).size)} (${backup.stdout.trim()})`);
  say(`202 before: ${stats(latencies.before)}`);
  say(`202 during: ${stats(latencies.during)}`);
  say(`202 after:  ${stats(latencies.after)}`);
  say(`answers: ${JSON.stringify(Object.fromEntries(statuses))}`);
  say(`WAL: ${mb(walBefore)} when the backup began, ${mb(walAtEnd)} when it ended, at most ${mb(walMax)}; ${mb(walSize())} 5 s later`);
  server.proc.kill("SIGTERM");
  await server.proc.exited;

  // Database.serialize(): the whole database as one buffer in memory.
  const probe = Bun.spawnSync([
    process.execPath,
    "-e",
    `const { Database } = require("bun:sqlite"); const db = new Database(${JSON.stringify(join(dir, "backup.sqlite"))}, { readonly: true });
     const t = performance.now(); const bytes = db.serialize(); const ms = performance.now() - t;
     console.log(JSON.stringify({ bytes: bytes.byteLength, ms: Math.round(ms), rssMb: Math.round(process.memoryUsage().rss / 1048576) }));`,
  ]);
  say(`serialize(): ${probe.stdout.toString().trim() || probe.stderr.toString().trim()}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
