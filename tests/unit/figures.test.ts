import { expect, test } from "bun:test";
import { count, elapsed } from "../../src/jobs/figures";

const at = (ms: number) => new Date(Date.UTC(2026, 10, 27) + ms).toISOString();
const after = (ms: number) => elapsed(at(0), at(ms));

test("elapsed: milliseconds under a second, tenths of seconds under a minute, then minutes and whole seconds", () => {
  expect([after(0), after(999), after(1_000), after(12_549), after(59_949)]).toEqual(["0 ms", "999 ms", "1.0 s", "12.5 s", "59.9 s"]);
  // Never "60.0 s" nor "1 min 60 s": what rounds to a whole minute is written as one.
  expect([after(59_950), after(60_000), after(119_600), after(185_000), after(3_600_000)]).toEqual(["1 min 0 s", "1 min 0 s", "2 min 0 s", "3 min 5 s", "60 min 0 s"]);
});

test("count: thousands separated by commas, whatever the machine's locale", () => {
  expect([count(0), count(999), count(1_234_567)]).toEqual(["0", "999", "1,234,567"]);
});
