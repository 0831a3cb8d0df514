import { describe, expect, test } from "bun:test";
import { connectionIdleSeconds, wholeBodyDeadlineSeconds } from "../../src/http/body";
import { Problem } from "../../src/http/problem";
import { smallBodyBytes, UploadGate } from "../../src/http/uploads";

/** The gate's arithmetic (http/uploads.ts); the HTTP side is tests/http/uploads.test.ts. */

const megabyte = 1024 * 1024;
const gateOf = (budgetMb: number, maxBodyMb: number, perEnvironment = 4) =>
  new UploadGate({ budgetBytes: budgetMb * megabyte, perEnvironment, maxBodyBytes: maxBodyMb * megabyte, stallSeconds: 30, minBytesPerSecond: 0 });

const statusOf = (reserve: () => void) => {
  try {
    reserve();
    return "ok";
  } catch (error) {
    return (error as Problem).status;
  }
};

describe("UploadGate", () => {
  test("an environment's share is half the budget, but always one body at the hard limit (within the budget)", () => {
    expect(gateOf(256, 100).environmentShareBytes).toBe(128 * megabyte);
    expect(gateOf(150, 100).environmentShareBytes).toBe(100 * megabyte);
    expect(gateOf(64, 100).environmentShareBytes).toBe(64 * megabyte);
  });

  test("429 past the environment's share, 503 past the budget; another environment still has its half", () => {
    const gate = gateOf(8, 4);
    const first = gate.begin(1);
    first.reserve(3 * megabyte);
    expect(statusOf(() => gate.begin(1).reserve(2 * megabyte))).toBe(429);
    const other = gate.begin(2);
    other.reserve(4 * megabyte);
    expect(statusOf(() => gate.begin(3).reserve(2 * megabyte))).toBe(503);
    expect(gate.inFlight()).toEqual({ count: 2, bytes: 7 * megabyte });
  });

  test("only bodies over 64 KiB count toward --uploads-per-environment; a chunked one once it grows past", () => {
    const gate = gateOf(256, 100, 2);
    for (let i = 0; i < 10; i++) gate.begin(1).reserve(smallBodyBytes);
    const growing = gate.begin(1);
    growing.reserve(smallBodyBytes);
    growing.reserve(2 * smallBodyBytes);
    gate.begin(1).reserve(smallBodyBytes + 1);
    expect(statusOf(() => gate.begin(1).reserve(smallBodyBytes + 1))).toBe(429);
    expect(statusOf(() => gate.begin(2).reserve(smallBodyBytes + 1))).toBe("ok");
  });

  test("end gives back everything, once, whatever was reserved; a refused reservation holds nothing", () => {
    const gate = gateOf(8, 4, 1);
    const upload = gate.begin(1);
    upload.reserve(megabyte);
    upload.reserve(3 * megabyte);
    expect(statusOf(() => gate.begin(1).reserve(megabyte))).toBe(429);
    upload.end();
    upload.end();
    expect(gate.inFlight()).toEqual({ count: 0, bytes: 0 });
    const refused = gate.begin(2);
    expect(statusOf(() => refused.reserve(9 * megabyte))).toBe(429);
    refused.end();
    expect(gate.inFlight()).toEqual({ count: 0, bytes: 0 });
    gate.begin(1).reserve(4 * megabyte);
    expect(gate.inFlight()).toEqual({ count: 1, bytes: 4 * megabyte });
  });
});

describe("a body read in one go (no progress to watch): its deadline", () => {
  const defaults = { stallSeconds: 30, minBytesPerSecond: 32 * 1024 };

  test("is the grace plus its length at the minimum rate", () => {
    expect(wholeBodyDeadlineSeconds(defaults, megabyte)).toBe(30 + 32);
  });

  test("comes before Bun would close the idle connection without an answer, however large the body", () => {
    expect(wholeBodyDeadlineSeconds(defaults, 16 * megabyte)).toBe(connectionIdleSeconds - 5);
  });

  test("without a minimum rate is that latest one: a slow body cannot be told from one that stopped", () => {
    expect(wholeBodyDeadlineSeconds({ stallSeconds: 30, minBytesPerSecond: 0 }, 1024)).toBe(connectionIdleSeconds - 5);
  });
});
