// Baseline for row 7: Redis + BullMQ doing what importd does for a one-record job, minus the work: enqueue
// from 20 concurrent producers, complete with a no-op processor. Usage: bun bullmq-queue.ts <redis port> <jobs> <clients>
import { Queue, Worker } from "bullmq";

const [port, jobCount, clientCount] = process.argv.slice(2).map(Number) as [number, number, number];
const connection = { host: "127.0.0.1", port };
const queue = new Queue("bench", { connection });
await queue.obliterate({ force: true }).catch(() => {});
let completed = 0;
let allCompleted!: () => void;
const done = new Promise<void>((resolve) => (allCompleted = resolve));
const worker = new Worker("bench", async () => {}, { connection, concurrency: 20, autorun: true });
worker.on("completed", () => ++completed === jobCount && allCompleted());
await worker.waitUntilReady();

const start = performance.now();
const perClient = jobCount / clientCount;
await Promise.all(
  Array.from({ length: clientCount }, async (_, client) => {
    for (let i = 0; i < perClient; i++) await queue.add("record", { id: `R-${client}-${i}`, name: "one record" }, { removeOnComplete: true });
  }),
);
const acceptedMs = performance.now() - start;
await done;
const completedMs = performance.now() - start;
await worker.close();
await queue.close();
console.log(JSON.stringify({ acceptedPerSecond: (jobCount / acceptedMs) * 1000, completedPerSecond: (jobCount / completedMs) * 1000 }));
process.exit(0);
