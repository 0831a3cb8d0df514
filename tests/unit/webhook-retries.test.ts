import { expect, test } from "bun:test";
import { nextAttemptAt, retryDelaysMs, retryWindowMs } from "../../src/webhooks/retries";

// The retry schedule (DECISIONS 10): exponential backoff with jitter, for 24 hours from the event.

const created = "2026-11-26T00:00:00.000Z";
const at = (ms: number) => Date.parse(created) + ms;

test("each wait is 5 s × 3^(n-1), at most 8 h, drawn between 80% and 120% of it", () => {
  expect(retryDelaysMs.slice(0, 4)).toEqual([5_000, 15_000, 45_000, 135_000]);
  expect(Math.max(...retryDelaysMs)).toBe(8 * 3_600_000);
  for (const [attempt, random, factor] of [[1, 0, 0.8], [1, 1, 1.2], [3, 0.5, 1]] as const) {
    const next = nextAttemptAt(attempt, created, at(0), { random: () => random })!;
    expect(Date.parse(next) - at(0)).toBeCloseTo(retryDelaysMs[attempt - 1]! * factor, 0);
  }
  expect(Date.parse(nextAttemptAt(20, created, at(0), { random: () => 0.5 })!) - at(0)).toBe(8 * 3_600_000);
});

test("the last attempt is at the end of the 24 hours; after it the delivery is given up", () => {
  expect(nextAttemptAt(9, created, at(retryWindowMs - 60_000), { random: () => 0.5 })).toBe(new Date(at(retryWindowMs)).toISOString());
  expect(nextAttemptAt(10, created, at(retryWindowMs))).toBeUndefined();
  // Followed through: about a dozen attempts in the day.
  let now = at(0);
  let attempts = 1;
  for (let next = nextAttemptAt(1, created, now); next !== undefined; next = nextAttemptAt(++attempts, created, now)) now = Date.parse(next);
  expect(attempts).toBeGreaterThanOrEqual(10);
  expect(attempts).toBeLessThanOrEqual(14);
  expect(now).toBe(at(retryWindowMs));
});

test("scaled (tests only), the whole schedule shrinks, its window too", () => {
  expect(Date.parse(nextAttemptAt(1, created, at(0), { scale: 0.001, random: () => 0.5 })!) - at(0)).toBe(5);
  expect(nextAttemptAt(1, created, at(retryWindowMs * 0.001), { scale: 0.001 })).toBeUndefined();
});
