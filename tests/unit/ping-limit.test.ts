import { expect, test } from "bun:test";
import { PingLimit } from "../../src/webhooks/ping-limit";

test("each environment has its own pings a minute; beyond, the seconds until the oldest leaves the minute, and nothing is counted", () => {
  let now = 1_000_000;
  const limit = new PingLimit(3, 60_000, () => now);
  for (let i = 0; i < 3; i++) {
    expect(limit.take(1)).toBeUndefined();
    now += 10_000;
  }
  // The first was 30 s ago: 30 s to wait.
  expect(limit.take(1)).toBe(30);
  expect(limit.take(2)).toBeUndefined();
  now += 29_500;
  expect(limit.take(1)).toBe(1);
  now += 501;
  expect(limit.take(1)).toBeUndefined();
  expect(limit.take(1)).toBe(10);
});
