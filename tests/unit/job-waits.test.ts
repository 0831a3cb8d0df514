import { expect, test } from "bun:test";
import { JobWaits } from "../../src/jobs/job-waits";

/** A held poll as the status route runs it: register, read, and again after each wake-up, until `ended()` says so. */
async function poll(waits: JobWaits, read: () => Promise<string>): Promise<string> {
  for (;;) {
    const held = waits.register(7, 10_000);
    const status = await waits.read("1/7", held.since, read);
    if (status === "Succeeded") return (held.cancel(), status);
    await held.done;
  }
}

test("the polls one wake-up wakes read their job once between them, and each gets what that read saw", async () => {
  const waits = new JobWaits();
  let status = "Processing";
  let reads = 0;
  const read = async () => (reads++, await Bun.sleep(5), status);
  const polls = Array.from({ length: 500 }, () => poll(waits, read));
  await Bun.sleep(50);
  // The first reads: one for all 500, which arrived together.
  expect(reads).toBe(1);
  expect(waits.size).toBe(500);
  status = "Succeeded";
  waits.finished([7]);
  expect(await Promise.all(polls)).toEqual(Array(500).fill("Succeeded"));
  expect(reads).toBe(2);
  expect(waits.size).toBe(0);
});

test("a read that began before a poll registered is not shared with it: an end in between would be missed", async () => {
  const waits = new JobWaits();
  let release!: () => void;
  let reads = 0;
  const slow = () => (reads++, new Promise<string>((resolve) => (release = () => resolve("Processing"))));
  const first = waits.read("1/7", waits.register(7, 1000).since, slow);
  await Bun.sleep(10); // the first read has begun
  const later = waits.register(7, 1000);
  const second = waits.read("1/7", later.since, async () => (reads++, "Succeeded"));
  release();
  expect(await first).toBe("Processing");
  expect(await second).toBe("Succeeded");
  expect(reads).toBe(2);
  waits.stop();
});

test("a failed read fails every poll that shared it, and the next read is a new one", async () => {
  const waits = new JobWaits();
  const failing = () => Promise.reject(new Error("the database is away"));
  const since = waits.register(7, 1000).since;
  const results = await Promise.allSettled([waits.read("1/7", since, failing), waits.read("1/7", since, failing)]);
  expect(results.map((result) => result.status)).toEqual(["rejected", "rejected"]);
  expect(await waits.read("1/7", waits.register(7, 1000).since, async () => "Pending")).toBe("Pending");
  waits.stop();
});
