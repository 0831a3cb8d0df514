import { afterEach, describe, expect, test } from "bun:test";
import { StorageUnavailable } from "../../src/store/errors";
import { WorkerCrashed, WorkerPool, type ThreadStores } from "../../src/worker/pool";
import { outboxRows } from "../../src/webhooks/outbox";
import { tempDir } from "../helpers/server";
import { until } from "../helpers/until";

// The stand-in threads open no store.
const noStore: ThreadStores = { handleFor: () => ({ backend: "none" }), threadDied: () => {} };

const flaky = new URL("../fixtures/flaky-thread.ts", import.meta.url);
const threadEntry = new URL("../../src/worker/thread.ts", import.meta.url);
let pool: WorkerPool | undefined;
afterEach(async () => {
  await pool?.close();
  pool = undefined;
});

describe("WorkerPool", () => {
  test("runs tasks on worker threads and returns their output", async () => {
    pool = new WorkerPool({ entry: flaky, size: 2, stores: noStore });
    await pool.ready();
    const outputs = await Promise.all(Array.from({ length: 10 }, () => pool!.run("purge", { before: "ok" })));
    expect(outputs).toEqual(Array.from({ length: 10 }, () => ({ count: 7 })));
  });

  test("a task runs on the slot it prefers when that one is free, and on another free slot rather than wait for a busy one", async () => {
    pool = new WorkerPool({ entry: flaky, size: 2, stores: noStore });
    await pool.ready();
    const slots: Record<string, number> = {};
    const run = (name: string, before: string, prefer?: number) => pool!.run("purge", { before }, [], { prefer, onSlot: (slot) => (slots[name] = slot) });
    for (const prefer of [0, 1, 1, 0]) {
      await run(`prefers ${prefer}`, "ok", prefer);
      expect(slots[`prefers ${prefer}`]).toBe(prefer);
    }
    const slow = run("slow", "slow", 0);
    await until(() => slots.slow !== undefined, { what: "the slow task to take slot 0" });
    await run("prefers the busy slot", "ok", 0);
    expect(slots["prefers the busy slot"]).toBe(1);
    await run("prefers no such slot", "ok", 9);
    expect(slots["prefers no such slot"]).toBe(1);
    await slow;
  });

  test("a thread doing its store's upkeep after answering (a checkpoint) is given no task until it is idle: another free thread takes it, or it waits", async () => {
    pool = new WorkerPool({ entry: flaky, size: 2, stores: noStore });
    await pool.ready();
    const slots: Record<string, number> = {};
    const run = (name: string, before: string) => pool!.run("purge", { before }, [], { onSlot: (slot) => (slots[name] = slot) });
    await run("upkeep after", "upkeep 300");
    await run("next", "ok");
    expect(slots.next).not.toBe(slots["upkeep after"]);
    await pool.close();

    pool = new WorkerPool({ entry: flaky, size: 1, stores: noStore });
    await pool.ready();
    await run("upkeep after", "upkeep 300");
    const answered = performance.now();
    await run("next", "ok");
    expect(performance.now() - answered).toBeGreaterThanOrEqual(250);
  });

  test("a task that prefers a thread doing its upkeep waits for it (its batch is held parsed there), while one that prefers none goes to another", async () => {
    pool = new WorkerPool({ entry: flaky, size: 2, stores: noStore });
    await pool.ready();
    const slots: Record<string, number> = {};
    const run = (name: string, before: string, prefer?: number) => pool!.run("purge", { before }, [], { prefer, onSlot: (slot) => (slots[name] = slot) });
    await run("upkeep after", "upkeep 300", 0);
    const answered = performance.now();
    await Promise.all([run("prefers it", "ok", 0), run("prefers none", "ok")]);
    expect(slots).toEqual({ "upkeep after": 0, "prefers it": 0, "prefers none": 1 });
    expect(performance.now() - answered).toBeGreaterThanOrEqual(250);
  });

  describe("a light lane (on a store that takes one write at a time): the first thread does the small jobs", () => {
    // Each task tells the slot it ran on and when it ended.
    const ends: Array<{ name: string; slot: number }> = [];
    const run = (name: string, before: string, light?: boolean) => {
      let slot = -1;
      return pool!.run("purge", { before }, [], { light, onSlot: (given) => (slot = given) }).then(() => void ends.push({ name, slot }));
    };
    afterEach(() => void ends.splice(0));

    test("a light task waits for the first thread rather than take another free one; other tasks take it last", async () => {
      pool = new WorkerPool({ entry: flaky, size: 2, stores: noStore, lightLane: true });
      await pool.ready();
      // Each task is given its thread (or queued) as it is run, in this order.
      await Promise.all([run("light, alone", "slow", true), run("light, queued behind it", "ok", true), run("other", "ok")]);
      expect(ends).toEqual([
        { name: "other", slot: 1 },
        { name: "light, alone", slot: 0 },
        { name: "light, queued behind it", slot: 0 },
      ]);
      ends.splice(0);
      // With the other thread busy, a task that is not light takes the first.
      await Promise.all([run("other, slow", "slow"), run("other, while the first is busy", "ok")]);
      expect(ends).toEqual([
        { name: "other, while the first is busy", slot: 0 },
        { name: "other, slow", slot: 1 },
      ]);
    });

    test("while the first thread runs a task that is not light, light tasks go to any free thread", async () => {
      pool = new WorkerPool({ entry: flaky, size: 2, stores: noStore, lightLane: true });
      await pool.ready();
      const slow = run("other, slow", "slow 150");
      const slower = run("other, slower, on the first thread", "slow 600");
      await run("light, queued while both are busy", "ok", true);
      expect(ends).toEqual([
        { name: "other, slow", slot: 1 },
        { name: "light, queued while both are busy", slot: 1 },
      ]);
      await Promise.all([slow, slower]);
      expect(ends.at(-1)).toEqual({ name: "other, slower, on the first thread", slot: 0 });
    });

    test("light intakes and others are not sent in one message", async () => {
      pool = new WorkerPool({ entry: flaky, size: 1, stores: noStore, lightLane: true });
      await pool.ready();
      const accept = (bytes: number, light: boolean) => pool!.run("accept", { environmentId: 1, resource: "assets", body: new ArrayBuffer(bytes) }, [], { light }) as unknown as Promise<{ groupSize: number }>;
      const busy = pool.run("purge", { before: "slow" });
      const answers = Promise.all([accept(1, true), accept(2, false), accept(3, true), accept(4, false)]);
      await busy;
      expect((await answers).map((answer) => answer.groupSize)).toEqual([2, 2, 2, 2]);
    });

    test("without a light lane, light tasks go to any free thread like the others", async () => {
      pool = new WorkerPool({ entry: flaky, size: 2, stores: noStore });
      await pool.ready();
      await Promise.all([run("light, slow", "slow", true), run("light, meanwhile", "ok", true)]);
      expect(ends).toEqual([
        { name: "light, meanwhile", slot: 1 },
        { name: "light, slow", slot: 0 },
      ]);
    });
  });

  describe("intakes queued together go to a thread in one message (one transaction there)", () => {
    const accept = (bytes: number, resource = "assets") =>
      pool!.run("accept", { environmentId: 1, resource, body: new ArrayBuffer(bytes) }) as unknown as Promise<{ groupSize: number; bytes: number }>;
    const megabyte = 1024 * 1024;

    test("an idle pool sends each alone; a busy one sends the queued ones together", async () => {
      pool = new WorkerPool({ entry: flaky, size: 1, stores: noStore });
      await pool.ready();
      expect(await accept(100)).toEqual({ groupSize: 1, bytes: 100 });
      const busy = pool.run("purge", { before: "slow" });
      const queued = await Promise.all([accept(1), accept(2), accept(3), accept(4), accept(5)]);
      await busy;
      expect(queued as unknown[]).toEqual([1, 2, 3, 4, 5].map((bytes) => ({ groupSize: 5, bytes })));
    });

    test("a group holds at most 8 MB of bodies (a bigger body goes alone), and only tasks of one type", async () => {
      pool = new WorkerPool({ entry: flaky, size: 1, stores: noStore });
      await pool.ready();
      const busy = pool.run("purge", { before: "slow" });
      const answers = Promise.all([accept(3 * megabyte), accept(3 * megabyte), accept(3 * megabyte), accept(20 * megabyte), accept(10)]);
      const purge = pool.run("purge", { before: "ok" });
      await busy;
      expect((await answers).map((answer) => answer.groupSize)).toEqual([2, 2, 1, 1, 1]);
      expect(await purge).toEqual({ count: 7 });
    });

    test("a thread that dies with a group rejects every task of it with WorkerCrashed", async () => {
      pool = new WorkerPool({ entry: flaky, size: 1, stores: noStore });
      await pool.ready();
      const busy = pool.run("purge", { before: "slow" });
      const group = [accept(1).catch((e) => e), accept(1, "exit").catch((e) => e), accept(1).catch((e) => e)];
      await busy;
      for (const outcome of await Promise.all(group)) expect(outcome).toBeInstanceOf(WorkerCrashed);
      expect(await accept(1)).toEqual({ groupSize: 1, bytes: 1 });
    });
  });

  test("a task that meets a storage fault inside the worker rejects with the store's named error", async () => {
    pool = new WorkerPool({ entry: flaky, size: 1, stores: noStore });
    await pool.ready();
    const error = await pool.run("purge", { before: "throw" }).catch((e) => e);
    expect(error).toBeInstanceOf(StorageUnavailable);
    expect(error.message).toBe("database is locked");
  });

  test("a worker that dies mid-task is replaced; its task rejects with WorkerCrashed and the pool goes on", async () => {
    const crashes: unknown[] = [];
    pool = new WorkerPool({ entry: flaky, size: 1, stores: noStore, onCrash: (error) => crashes.push(error) });
    await pool.ready();
    const error = await pool.run("purge", { before: "exit" }).catch((e) => e);
    expect(error).toBeInstanceOf(WorkerCrashed);
    expect(crashes).toHaveLength(1);
    expect(await pool.run("purge", { before: "ok" })).toEqual({ count: 7 });
  });

  test("threads that die before they are ready fail ready() with the reason, after a few spaced retries", async () => {
    const crashes: unknown[] = [];
    const entry = new URL("../fixtures/broken-thread.ts", import.meta.url);
    pool = new WorkerPool({ entry, size: 2, stores: noStore, onCrash: (error) => crashes.push(error) });
    const error = await pool.ready().catch((e) => e);
    expect(error).toBeInstanceOf(WorkerCrashed);
    expect(error.message).toContain("worker threads cannot start");
    expect(error.message).toContain("cannot open the database");
    // Backoff, not a tight loop: a handful of attempts, not thousands.
    expect(crashes.length).toBeGreaterThanOrEqual(3);
    expect(crashes.length).toBeLessThan(10);
  });

  test("the real worker thread opens the database and answers", async () => {
    const { SqliteStore } = await import("../../src/store/sqlite/store");
    const store = SqliteStore.open(tempDir(), { outbox: outboxRows });
    pool = new WorkerPool({ entry: threadEntry, size: 1, stores: store });
    await pool.ready();
    expect(await pool.run("purge", { before: "2000-01-01T00:00:00.000Z" })).toEqual({ count: 0 });
    await pool.close();
    pool = undefined;
    await store.close();
  });
});
