import { expect, test } from "bun:test";
import { counts, failures } from "../run";

// What `bun test --parallel` printed for one process: files interleaved, a failure's error printed before its line.
const output = `
tests/http/edge.test.ts:
(pass) an answer [1.00ms]
error: expect(received).toBe(expected)

Expected: 200
Received: 503

      at <anonymous> (/ci/tests/http/edge.test.ts:10:5)
(fail) a request under load > is answered 200 [30.00ms]

tests/jobs/long-poll.test.ts:
(pass) a held poll [3.00ms]
(fail) a poll that timed out [60000.00ms]
  ^ this test timed out after 60000ms.

 2 pass
 2 fail

2 tests failed:
(fail) a request under load > is answered 200 [30.00ms]
(fail) a poll that timed out [60000.00ms]
`;

test("failures: each failed test's line after the error bun printed for it, once, and nothing of the tests that passed", () => {
  const found = failures(output);
  expect(found).toHaveLength(2);
  expect(found[0]).toContain("Received: 503");
  expect(found[0]).toContain("edge.test.ts:10:5");
  expect(found[0]!.endsWith("(fail) a request under load > is answered 200 [30.00ms]")).toBe(true);
  expect(found[0]).not.toContain("(pass)");
  expect(found[1]).toBe("(fail) a poll that timed out [60000.00ms]");
});

test("failures: a long error keeps its last lines", () => {
  const long = `${Array.from({ length: 100 }, (_, i) => `line ${i}`).join("\n")}\n(fail) slow [1ms]\n`;
  const [failure] = failures(long, 5);
  expect(failure).toBe("line 95\nline 96\nline 97\nline 98\nline 99\n(fail) slow [1ms]");
});

test("counts: the pass and fail totals of a process's closing lines", () => {
  expect(counts(output)).toEqual({ passed: 2, failed: 2 });
});
