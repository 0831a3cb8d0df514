import { expect, test } from "bun:test";
import { CommittedReads } from "../../src/store/read-cache";
import type { CommitWatch } from "../../src/store/ports";

/** A commit counter standing in for the database's. */
function fakeCommits() {
  let commits = 0;
  const watch: CommitWatch = { mark: () => commits, unchangedSince: (mark) => mark === commits };
  return { watch, commit: () => void commits++ };
}

const counted = <V>(value: () => V | undefined) => {
  const read = Object.assign(async () => (read.calls++, value()), { calls: 0 });
  return read;
};

test("a value is read once while nothing is committed, and again after a commit", async () => {
  const { watch, commit } = fakeCommits();
  const cache = new CommittedReads<string, string>(watch);
  let stored = "first";
  const read = counted(() => stored);
  expect(await cache.get("k", read)).toBe("first");
  expect(await cache.get("k", read)).toBe("first");
  expect(read.calls).toBe(1);
  stored = "second";
  commit();
  expect(await cache.get("k", read)).toBe("second");
  expect(read.calls).toBe(2);
});

test("a value read while a commit lands is answered but not kept", async () => {
  const { watch, commit } = fakeCommits();
  const cache = new CommittedReads<string, string>(watch);
  const racing = counted(() => (commit(), "read across a commit"));
  expect(await cache.get("k", racing)).toBe("read across a commit");
  const read = counted(() => "current");
  expect(await cache.get("k", read)).toBe("current");
  expect(read.calls).toBe(1);
});

test("nothing found is not kept, and a full cache reads through", async () => {
  const { watch } = fakeCommits();
  const cache = new CommittedReads<number, string>(watch, 2);
  const missing = counted(() => undefined);
  expect(await cache.get(1, missing)).toBeUndefined();
  expect(await cache.get(1, missing)).toBeUndefined();
  expect(missing.calls).toBe(2);
  for (const key of [2, 3]) await cache.get(key, async () => `v${key}`);
  const third = counted(() => "v4");
  await cache.get(4, third);
  await cache.get(4, third);
  expect(third.calls).toBe(2);
});
