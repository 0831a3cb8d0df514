import { afterEach, expect, test } from "bun:test";
import { WriteLock } from "../../src/store/sqlite/write-lock";

const holderEntry = new URL("../fixtures/lock-holder.ts", import.meta.url);
let holder: Worker | undefined;
afterEach(() => {
  holder?.terminate();
  holder = undefined;
});

/** Starts a thread that takes the turn of `owner` for `holdMs`; resolves once it holds it. */
async function holdIn(buffer: SharedArrayBuffer, owner: number, holdMs: number): Promise<Worker> {
  holder = new Worker(holderEntry);
  const holding = new Promise<void>((resolve) => holder!.addEventListener("message", (event) => event.data === "holding" && resolve()));
  holder.postMessage({ buffer, owner, holdMs });
  await holding;
  return holder;
}

const timed = (fn: () => void) => {
  const start = performance.now();
  fn();
  return performance.now() - start;
};

test("a thread waits for another thread's turn, and goes as soon as it ends, not after its own time limit", async () => {
  const buffer = WriteLock.sharedBuffer();
  await holdIn(buffer, 1, 300);
  const order: string[] = [];
  const waited = timed(() => new WriteLock(buffer, 2, 10_000).run(() => order.push("mine")));
  expect(order).toEqual(["mine"]);
  expect(waited).toBeGreaterThan(150);
  expect(waited).toBeLessThan(3_000);
});

test("turns come back: one thread runs many turns in a row, and the value it returns is passed on", () => {
  const lock = new WriteLock(WriteLock.sharedBuffer(), 1, 100);
  let total = 0;
  for (let i = 0; i < 1_000; i++) total += lock.run(() => i);
  expect(total).toBe(499_500);
  // A turn whose work throws is still given back.
  expect(() => lock.run(() => { throw new Error("boom"); })).toThrow("boom");
  expect(timed(() => lock.run(() => {}))).toBeLessThan(50);
});

test("the turn of a thread that died holding it is freed by releaseFor, so the others do not wait for it", async () => {
  const buffer = WriteLock.sharedBuffer();
  (await holdIn(buffer, 7, 60_000)).terminate();
  WriteLock.releaseFor(buffer, 7);
  expect(timed(() => new WriteLock(buffer, 2, 10_000).run(() => {}))).toBeLessThan(100);
});

test("releaseFor leaves a living thread's turn alone", async () => {
  const buffer = WriteLock.sharedBuffer();
  await holdIn(buffer, 3, 300);
  WriteLock.releaseFor(buffer, 4);
  expect(timed(() => new WriteLock(buffer, 2, 10_000).run(() => {}))).toBeGreaterThan(150);
});

test("a turn never given back costs at most maxWaitMs: then the waiter goes ahead (SQLite's own lock still decides)", async () => {
  const buffer = WriteLock.sharedBuffer();
  (await holdIn(buffer, 5, 60_000)).terminate();
  const waited = timed(() => new WriteLock(buffer, 2, 200).run(() => {}));
  expect(waited).toBeGreaterThan(150);
  expect(waited).toBeLessThan(2_000);
});

test("owner numbers start at 1 (0 means no holder)", () => {
  expect(() => new WriteLock(WriteLock.sharedBuffer(), 0)).toThrow(RangeError);
});
