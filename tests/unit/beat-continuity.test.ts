import { expect, test } from "bun:test";
import { BeatContinuity, heartbeatEveryMs } from "../../src/store/postgres/liveness";

// An instance judges others only after writing its own heartbeat for 10 s without a gap (store/postgres/liveness.ts).

test("an instance may judge others once it has beaten for 10 s without a gap, not before", () => {
  const continuity = new BeatContinuity();
  expect(continuity.mayJudge(0)).toBe(false);
  for (let at = 0; at <= 8_000; at += heartbeatEveryMs) continuity.beat(at);
  expect(continuity.mayJudge(9_999)).toBe(false);
  continuity.beat(10_000);
  expect(continuity.mayJudge(10_000)).toBe(true);
});

test("a gap (a pause of its own) or a heartbeat it could not write starts the 10 s afresh", () => {
  const paused = new BeatContinuity();
  for (let at = 0; at <= 20_000; at += heartbeatEveryMs) paused.beat(at);
  expect(paused.mayJudge(20_000)).toBe(true);
  // Resumed 30 s later: its own heartbeat was as late as any it would judge.
  paused.beat(50_000);
  expect(paused.mayJudge(50_000)).toBe(false);
  expect(paused.mayJudge(59_999)).toBe(false);
  for (let at = 52_000; at <= 60_000; at += heartbeatEveryMs) paused.beat(at);
  expect(paused.mayJudge(60_000)).toBe(true);
  // A late tick of a busy loop (5 s) is not a gap.
  paused.beat(65_000);
  expect(paused.mayJudge(65_000)).toBe(true);

  const cutOff = new BeatContinuity();
  for (let at = 0; at <= 20_000; at += heartbeatEveryMs) cutOff.beat(at);
  cutOff.failed();
  expect(cutOff.mayJudge(22_000)).toBe(false);
  cutOff.beat(22_000);
  expect(cutOff.mayJudge(31_999)).toBe(false);
  expect(cutOff.mayJudge(32_000)).toBe(true);
});
