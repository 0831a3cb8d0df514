import { describe, expect, test } from "bun:test";
import { duration, progressEntry, progressLine, type Progress } from "../../src/importer/progress";

// A 200,000-row file a quarter applied, read to the end long ago: the case the issue saw at 100%.
const midway: Progress = { read: 200_000, sent: 199_990, applied: 49_980, rejected: 12, rejectedBeforeSending: 2, total: 200_000, totalKnown: true, elapsedMs: 6_000 };
const biggest: Progress = { read: 12_345_678, sent: 12_345_678, applied: 9_876_543, rejected: 123_456, rejectedBeforeSending: 0, total: 98_765_432, totalKnown: false, elapsedMs: 3_600_000 };
const starting: Progress = { read: 0, sent: 0, applied: 0, rejected: 0, rejectedBeforeSending: 0, total: 0, totalKnown: false, elapsedMs: 0 };

describe("the progress line on a terminal", () => {
  for (const columns of [40, 80, 200]) {
    test(`fits ${columns} columns on one screen line, whatever the numbers`, () => {
      for (const progress of [midway, biggest, starting]) {
        const line = progressLine(progress, columns);
        // Shorter than the width: a line that fills the last column wraps on some terminals.
        expect(line.length).toBeLessThan(columns);
        expect(line).not.toContain("\n");
        expect(line).toMatch(/\d+%/);
      }
    });
  }

  test("at 80 columns: bar, percentage of records done, applied, rejected, total, rate and time left", () => {
    const line = progressLine(midway, 80);
    expect(line).toBe("[###........]  24%  49,980 applied  12 rejected  of 200,000  8,332/s  19 s left");
  });

  test("at 80 columns with six-digit counts the rate goes first, so that the bar stays", () => {
    const line = progressLine({ ...midway, read: 150_000, applied: 150_877, rejected: 31, total: 300_224, totalKnown: false, elapsedMs: 8_300 }, 80);
    expect(line).toBe("[##########.........]  50%  150,877 applied  31 rejected  of ~300,224  9 s left");
  });

  test("no time left until there is a pace to go by: 3 s and 1% of the records in (a walk-through saw '4 h 4 min left' at first)", () => {
    const early = { ...midway, applied: 0, rejected: 34, total: 192_038, totalKnown: false, elapsedMs: 2_500 };
    expect(progressLine(early, 200)).not.toContain("left");
    expect(progressLine({ ...early, elapsedMs: 4_000 }, 200)).not.toContain("left");
    expect(progressLine({ ...early, applied: 2_000, elapsedMs: 4_000 }, 200)).toContain("6 min left");
  });

  test("at 40 columns it keeps the percentage, the counts and the time left", () => {
    expect(progressLine(midway, 40)).toBe(" 24%  49,980 applied  12 rejected");
    expect(progressLine({ ...midway, rejected: 0 }, 40)).toBe(" 24%  49,980 applied  19 s left");
  });

  test("at 200 columns the bar is 30 cells", () => {
    expect(progressLine(midway, 200)).toStartWith(`[${"#".repeat(7)}${".".repeat(23)}]  24%`);
  });

  test("follows records done, not bytes read: a file read to the end is not 100% until its records are applied", () => {
    expect(progressLine({ ...midway, applied: 199_980, rejected: 12 }, 80)).toContain(" 99% ");
    expect(progressLine({ ...midway, applied: 199_988, rejected: 12 }, 80)).toMatch(/^\[#+\] 100% /);
    // While the file is still being read the total is an estimate, and says so.
    expect(progressLine({ ...midway, totalKnown: false }, 80)).toContain("of ~200,000");
  });
});

test("the plain line (stderr not a terminal) has every count", () => {
  expect(progressEntry({ ...midway, job: { id: 17, importJobStatus: "Succeeded" } })).toBe(
    "200000 records read, 199990 records sent, 49980 applied, 12 rejected (2 before sending); 8332 records/s (job 17: Succeeded)",
  );
});

test("durations read as people say them", () => {
  expect([duration(0.2), duration(42), duration(200), duration(3 * 3600 + 600)]).toEqual(["1 s", "42 s", "3 min", "3 h 10 min"]);
});

test("a dry run's counts are what applying would do, and say so: never applied or deleted", () => {
  expect(progressEntry({ ...midway, dryRun: true })).toBe("200000 records read, 199990 records sent, would apply 49980, would reject 12 (2 before sending); 8332 records/s");
  expect(progressEntry({ ...midway, dryRun: true, deletes: { deleted: 49_000, notFound: 980 } })).toBe(
    "200000 ids read, 199990 ids sent, would delete 49000, would not find 980, would reject 12 (2 before sending); 8332 ids/s",
  );
  expect(progressLine({ ...midway, dryRun: true, deletes: { deleted: 49_000, notFound: 980 } }, 60)).toBe(" 24%  would delete 49,000  would reject 12  19 s left");
});
