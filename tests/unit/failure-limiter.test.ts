import { describe, expect, test } from "bun:test";
import { FailureLimiter, MemoryFailureLog } from "../../src/access/failure-limiter";

function limiter(perMinute: number, maxClients?: number) {
  const clock = { now: 1_000_000 };
  const log = new MemoryFailureLog(maxClients);
  return { clock, log, limiter: new FailureLimiter(perMinute, log, () => clock.now) };
}

describe("FailureLimiter on a MemoryFailureLog", () => {
  test("lets a client fail perMinute times, then asks it to wait until its oldest counted failure is a minute old", async () => {
    const { clock, limiter: l } = limiter(3);
    for (let i = 0; i < 3; i++) {
      expect(await l.retryAfter("a")).toBeUndefined();
      await l.recordFailure("a");
      clock.now += 10_000;
    }
    // Failures at 0 s, 10 s, 20 s; now 30 s: the first leaves the window at 60 s.
    expect(await l.retryAfter("a")).toBe(30);
    clock.now += 29_000;
    expect(await l.retryAfter("a")).toBe(1);
    clock.now += 1_000;
    expect(await l.retryAfter("a")).toBeUndefined();
  });

  test("is empty until a failure, and again once every failure has been looked at past its minute", async () => {
    const { clock, log, limiter: l } = limiter(3);
    expect(log.empty).toBe(true);
    await l.recordFailure("a");
    expect(log.empty).toBe(false);
    clock.now += 60_001;
    expect(await l.retryAfter("a")).toBeUndefined();
    expect(log.empty).toBe(true);
  });

  test("counts each address on its own", async () => {
    const { limiter: l } = limiter(2);
    await l.recordFailure("a");
    await l.recordFailure("a");
    expect(await l.retryAfter("a")).toBe(60);
    expect(await l.retryAfter("b")).toBeUndefined();
  });

  test("only the newest perMinute failures count: the wait ends when the older of them is a minute old", async () => {
    const { clock, limiter: l } = limiter(2);
    await l.recordFailure("a");
    await l.recordFailure("a");
    clock.now += 50_000;
    await l.recordFailure("a");
    // Counted: 0 s and 50 s; at 60 s only one failure is left in the window.
    expect(await l.retryAfter("a")).toBe(10);
    clock.now += 10_000;
    expect(await l.retryAfter("a")).toBeUndefined();
  });

  test("0 means no limit", async () => {
    const { limiter: l } = limiter(0);
    for (let i = 0; i < 1000; i++) await l.recordFailure("a");
    expect(await l.retryAfter("a")).toBeUndefined();
  });

  test("remembers at most maxClients addresses, forgetting the longest quiet", async () => {
    const { limiter: l } = limiter(1, 2);
    await l.recordFailure("a");
    await l.recordFailure("b");
    await l.recordFailure("c");
    expect(await l.retryAfter("a")).toBeUndefined();
    expect(await l.retryAfter("b")).toBe(60);
    expect(await l.retryAfter("c")).toBe(60);
  });
});
