import { describe, expect, test } from "bun:test";
import { duplicateIdsOutcome, maxOutputErrors, recordOutcome, type Rejection } from "../../src/jobs/outcome";

const unknownSubArea = (index: number, id = `A-${index}`): Rejection => ({
  index,
  id,
  field: "subAreaId",
  reason: "Unknown subAreaId (no such sub area in this environment)",
  message: `'Sub Area Id' 'X' does not exist in this environment.`,
});
const none = { created: 0, updated: 0, unchanged: 0 };
const unknownType = (index: number): Rejection => ({ ...unknownSubArea(index), field: "assetTypeId", reason: "Unknown assetTypeId (no such asset type in this environment)" });

describe("job outcome", () => {
  test("nothing rejected is Succeeded with counts and no errors", () => {
    const { status, output } = recordOutcome(5, [], { created: 3, updated: 1, unchanged: 1 });
    expect(status).toBe("Succeeded");
    expect(output).toEqual({ message: "All 5 records were applied (3 created, 1 updated, 1 unchanged).", total: 5, applied: 5, rejected: 0, errors: [], created: 3, updated: 1, unchanged: 1 });
  });

  test("some rejected is PartiallySucceeded; the message says how many, which and why", () => {
    const { status, output } = recordOutcome(10, [unknownSubArea(2), unknownSubArea(7), unknownType(4)], { created: 7, updated: 0, unchanged: 0 });
    expect(status).toBe("PartiallySucceeded");
    expect(output).toMatchObject({ total: 10, applied: 7, rejected: 3 });
    expect(output.message).toStartWith("3 of 10 records were rejected and 7 applied (7 created, 0 updated, 0 unchanged).");
    expect(output.message).toContain("Unknown subAreaId (no such sub area in this environment): 2 records, [2] 'A-2', [7] 'A-7'.");
    expect(output.message).toContain("Unknown assetTypeId (no such asset type in this environment): 1 record, [4] 'A-4'.");
    expect(output.errors).toEqual([
      { index: 2, id: "A-2", field: "subAreaId", message: "'Sub Area Id' 'X' does not exist in this environment." },
      { index: 7, id: "A-7", field: "subAreaId", message: "'Sub Area Id' 'X' does not exist in this environment." },
      { index: 4, id: "A-4", field: "assetTypeId", message: "'Sub Area Id' 'X' does not exist in this environment." },
    ]);
  });

  test("all rejected is Failed and says nothing was applied", () => {
    const { status, output } = recordOutcome(2, [unknownSubArea(0), unknownSubArea(1)], none);
    expect(status).toBe("Failed");
    expect(output.applied).toBe(0);
    expect(output.message).toStartWith("All 2 records were rejected; nothing was applied.");
  });

  test("a message about many rejections stays short: examples are capped per reason", () => {
    const rejections = Array.from({ length: 50_000 }, (_, i) => unknownSubArea(i));
    const { output } = recordOutcome(100_000, rejections, { created: 50_000, updated: 0, unchanged: 0 });
    expect(output.message.length).toBeLessThan(1000);
    expect(output.message).toContain("50000 records, [0] 'A-0'");
    expect(output.message).toContain("and 49990 more");
  });

  test("errors is capped and the message says so", () => {
    const rejections = Array.from({ length: maxOutputErrors + 5 }, (_, i) => unknownSubArea(i));
    const { output } = recordOutcome(maxOutputErrors + 10, rejections, { created: 5, updated: 0, unchanged: 0 });
    expect(output.errors).toHaveLength(maxOutputErrors);
    expect(output.rejected).toBe(maxOutputErrors + 5);
    expect(output.message).toContain(`errors lists the first ${maxOutputErrors} of ${maxOutputErrors + 5}`);
  });

  test("many distinct reasons: the first few are described, the rest counted", () => {
    const rejections = Array.from({ length: 8 }, (_, i) => ({ ...unknownSubArea(i), reason: `reason ${i}` }));
    const { output } = recordOutcome(20, rejections, { created: 12, updated: 0, unchanged: 0 });
    expect(output.message).toContain("reason 4: 1 record");
    expect(output.message).not.toContain("reason 5:");
    expect(output.message).toContain("3 other reasons not shown here; see errors.");
  });

  test("duplicate ids fail the batch and name the ids and their indexes", () => {
    const { status, output } = duplicateIdsOutcome(6, new Map([["A-1", [0, 3]], ["A-2", [1, 4, 5]]]));
    expect(status).toBe("Failed");
    expect(output).toMatchObject({ total: 6, applied: 0, rejected: 6 });
    expect(output.message).toContain("'A-1' at [0], [3]; 'A-2' at [1], [4], [5]");
    expect(output.message).toContain("Nothing was applied");
    expect(output.errors.map((e) => [e.index, e.id])).toEqual([[0, "A-1"], [3, "A-1"], [1, "A-2"], [4, "A-2"], [5, "A-2"]]);
  });
});

test("a dry run's job message does not say that applied records are kept: none were", () => {
  const real = recordOutcome(2, [unknownSubArea(1)], { ...none, created: 1 });
  const dry = recordOutcome(2, [unknownSubArea(1)], { ...none, created: 1 }, true);
  expect(real.output.message).toEndWith("Fix and re-send only the rejected records; the applied ones are kept.");
  expect(dry.output.message).toEndWith("Fix the rejected records before you send the batch for real.");
  expect(dry.output.message).not.toContain("kept");
});
