import { describe, expect, test } from "bun:test";
import { FailureLimiter, failureKey, MemoryFailureLog } from "../../src/access/failure-limiter";

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

describe("failureKey: whom a failure is counted against", () => {
  test("an IPv4 address as it is; an IPv4 address written as IPv6 (mapped, or in the NAT64 well-known prefix) as that address", () => {
    expect(failureKey("203.0.113.7")).toBe("203.0.113.7");
    expect(failureKey("::ffff:203.0.113.7")).toBe("203.0.113.7");
    expect(failureKey("::ffff:cb00:7107")).toBe("203.0.113.7");
    expect(failureKey("64:ff9b::203.0.113.7")).toBe("203.0.113.7");
  });

  test("an IPv6 address by its /64, however it is written", () => {
    expect(failureKey("2001:db8:1:2::1")).toBe("2001:db8:1:2::/64");
    expect(failureKey("2001:DB8:1:2:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
    expect(failureKey("2001:0db8:0001:0002:0:0:0:9")).toBe("2001:db8:1:2::/64");
    expect(failureKey("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(failureKey("::1")).toBe("0:0:0:0::/64");
    expect(failureKey("2001:db8:1:3::1")).not.toBe(failureKey("2001:db8:1:2::1"));
  });

  test("what is not an address as it is", () => {
    expect(failureKey("unknown")).toBe("unknown");
  });
});

describe("FailureLimiter counts an IPv6 client per /64", () => {
  test("wrong keys from addresses of one /64 add up; another /64 is not held up; the log holds the /64", async () => {
    const { log, limiter: l } = limiter(3);
    for (const address of ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:a:b:c:d"]) await l.recordFailure(address);
    expect(await l.retryAfter("2001:db8:1:2:ffff::9")).toBe(60);
    expect(await l.retryAfter("2001:db8:1:3::1")).toBeUndefined();
    expect(await log.recent("2001:db8:1:2::/64", 0, 10)).toHaveLength(3);
  });

  test("an IPv4 client counts the same whether its address comes written as IPv4 or as IPv6", async () => {
    const { limiter: l } = limiter(2);
    await l.recordFailure("203.0.113.7");
    await l.recordFailure("::ffff:203.0.113.7");
    expect(await l.retryAfter("203.0.113.7")).toBe(60);
    expect(await l.retryAfter("203.0.113.8")).toBeUndefined();
  });
});
