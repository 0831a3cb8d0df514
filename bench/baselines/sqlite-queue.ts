// Row 7's second baseline, untargeted since issue 45 (its target is the HTTP queue floor, http-queue.ts): a minimal
// durable bun:sqlite queue with no HTTP, so that the table shows what HTTP costs. It was the fallback for
// Redis + BullMQ, which cannot be installed from the lockfile here.
// Usage: bun sqlite-queue.ts <dir> <jobs> [warm-up jobs]   Enqueue each job in its own transaction, then claim
// and complete them in a loop; the warm-up jobs go through the same loop first, untimed.
import { Database } from "bun:sqlite";
import { join } from "node:path";

const [dir, jobs, warmUp = "0"] = process.argv.slice(2);
const db = new Database(join(dir!, "queue.sqlite"), { create: true });
db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL");
db.exec("CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, status TEXT NOT NULL, payload TEXT NOT NULL)");
const insert = db.prepare("INSERT INTO jobs (status, payload) VALUES ('Pending', ?)");
const next = db.prepare("SELECT id FROM jobs WHERE status = 'Pending' ORDER BY id LIMIT 1");
const complete = db.prepare("UPDATE jobs SET status = 'Succeeded' WHERE id = ?");

function run(jobCount: number) {
  const start = performance.now();
  for (let i = 0; i < jobCount; i++) insert.run(JSON.stringify([{ id: `R-${i}`, name: "one record" }]));
  const acceptedMs = performance.now() - start;
  for (let row = next.get() as { id: number } | null; row; row = next.get() as { id: number } | null) complete.run(row.id);
  const completedMs = performance.now() - start;
  return { acceptedPerSecond: (jobCount / acceptedMs) * 1000, completedPerSecond: (jobCount / completedMs) * 1000 };
}

run(Number(warmUp));
console.log(JSON.stringify(run(Number(jobs))));
