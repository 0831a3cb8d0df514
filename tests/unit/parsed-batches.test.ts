import { expect, test } from "bun:test";
import { ParsedBatches } from "../../src/worker/parsed-batches";

const records = (id: string) => ({ records: [{ id }], sent: [{ id, extra: null }] });

test("ParsedBatches hands a job's batch over once", () => {
  const cache = new ParsedBatches(100);
  cache.add(1, records("a"), 10);
  expect(cache.take(1)).toEqual(records("a"));
  expect(cache.take(1)).toBeUndefined();
  expect(cache.take(2)).toBeUndefined();
});

test("ParsedBatches drops the oldest batches past its byte budget, but always keeps the newest", () => {
  const cache = new ParsedBatches(100);
  cache.add(1, records("a"), 40);
  cache.add(2, records("b"), 40);
  cache.add(3, records("c"), 40);
  expect(cache.take(1)).toBeUndefined();
  expect(cache.take(2)).toEqual(records("b"));
  cache.add(4, records("d"), 500);
  expect(cache.take(3)).toBeUndefined();
  expect(cache.take(4)).toEqual(records("d"));
  // Taking frees its bytes: two more fit again.
  cache.add(5, records("e"), 50);
  cache.add(6, records("f"), 50);
  expect(cache.take(5)).toEqual(records("e"));
  expect(cache.take(6)).toEqual(records("f"));
});
