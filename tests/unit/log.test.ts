import { describe, expect, test } from "bun:test";
import { createLog } from "../../src/log";

function capture(logLevel: "debug" | "info" | "warn" | "error", logFormat: "json" | "pretty") {
  const lines: string[] = [];
  return { lines, log: createLog({ logLevel, logFormat }, (line) => lines.push(line)) };
}

describe("createLog", () => {
  test("json: one parseable line per entry, with time and level", () => {
    const { lines, log } = capture("info", "json");
    log({ msg: "request", method: "GET", status: 200 });
    expect(lines).toHaveLength(1);
    expect(lines[0]!.endsWith("\n")).toBe(true);
    expect(lines[0]!.trimEnd().includes("\n")).toBe(false);
    const entry = JSON.parse(lines[0]!);
    expect(entry).toMatchObject({ msg: "request", method: "GET", status: 200, level: "info" });
    expect(new Date(entry.time).toISOString()).toBe(entry.time);
  });

  test("pretty: a readable line with time, level, message and key=value fields", () => {
    const { lines, log } = capture("info", "pretty");
    log({ level: "warn", msg: "job finished", jobId: 7, outcome: "Failed", detail: { a: 1 } });
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT\S+Z WARN  job finished jobId=7 outcome=Failed detail=\{"a":1\}\n$/);
  });

  test("entries below the level are dropped", () => {
    const { lines, log } = capture("warn", "json");
    log({ level: "debug", msg: "a" });
    log({ msg: "b" });
    log({ level: "warn", msg: "c" });
    log({ level: "error", msg: "d" });
    expect(lines.map((line) => JSON.parse(line).msg)).toEqual(["c", "d"]);
  });
});
