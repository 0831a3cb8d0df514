import { describe, expect, test } from "bun:test";
import { FailureLimiter } from "../../src/access/failure-limiter";

function limiter(perMinute: number, maxClients?: number) {
  const clock = { now: 1_000_000 };
  return { clock, limiter: new FailureLimiter(perMinute, () => clock.now, maxClients) };
}

describe("FailureLimiter", () => {
  test("lets a client fail perMinute times, then asks it to wait until its oldest counted failure is a minute old", () => {
    const { clock, limiter: l } = limiter(3);
    for (let i = 0; i < 3; i++) {
      expect(l.retryAfter("a")).toBeUndefined();
      l.recordFailure("a");
      clock.now += 10_000;
    }
    // Failures at 0 s, 10 s, 20 s; now 30 s: the first leaves the window at 60 s.
    expect(l.retryAfter("a")).toBe(30);
    clock.now += 29_000;
    expect(l.retryAfter("a")).toBe(1);
    clock.now += 1_000;
    expect(l.retryAfter("a")).toBeUndefined();
  });

  test("is empty until a failure, and again once every failure has been looked at past its minute", () => {
    const { clock, limiter: l } = limiter(3);
    expect(l.empty).toBe(true);
    l.recordFailure("a");
    expect(l.empty).toBe(false);
    clock.now += 60_001;
    expect(l.retryAfter("a")).toBeUndefined();
    expect(l.empty).toBe(true);
  });

  test("counts each address on its own", () => {
    const { limiter: l } = limiter(2);
    l.recordFailure("a");
    l.recordFailure("a");
    expect(l.retryAfter("a")).toBe(60);
    expect(l.retryAfter("b")).toBeUndefined();
  });

  test("only the newest perMinute failures count: the wait ends when the older of them is a minute old", () => {
    const { clock, limiter: l } = limiter(2);
    l.recordFailure("a");
    l.recordFailure("a");
    clock.now += 50_000;
    l.recordFailure("a");
    // Counted: 0 s and 50 s; at 60 s only one failure is left in the window.
    expect(l.retryAfter("a")).toBe(10);
    clock.now += 10_000;
    expect(l.retryAfter("a")).toBeUndefined();
  });

  test("0 means no limit", () => {
    const { limiter: l } = limiter(0);
    for (let i = 0; i < 1000; i++) l.recordFailure("a");
    expect(l.retryAfter("a")).toBeUndefined();
  });

  test("remembers at most maxClients addresses, forgetting the longest quiet", () => {
    const { limiter: l } = limiter(1, 2);
    l.recordFailure("a");
    l.recordFailure("b");
    l.recordFailure("c");
    expect(l.retryAfter("a")).toBeUndefined();
    expect(l.retryAfter("b")).toBe(60);
    expect(l.retryAfter("c")).toBe(60);
  });
});
