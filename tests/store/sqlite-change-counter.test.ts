import { afterEach, expect, test } from "bun:test";
import { chownSync, statSync } from "node:fs";
import { join } from "node:path";
import { Access } from "../../src/access/access";
import { changeCounterOf, writeTransaction } from "../../src/store/sqlite/database";
import { environments } from "../../src/store/sqlite/schema";
import { SqliteStore } from "../../src/store/sqlite/store";
import { outboxRows } from "../../src/webhooks/outbox";
import { projectRoot, importdCommand } from "../helpers/process";
import { tempDir } from "../helpers/server";

// The server's caches (src/store/read-cache.ts) go by the data directory's count of write transactions
// (src/store/sqlite/change-counter.ts): every write through importd's store, by any connection of any process,
// must show; reads and a write still under way must keep them from caching.

const opened: SqliteStore[] = [];
afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
});

const open = (dataDir: string, server = false) => {
  const store = SqliteStore.open(dataDir, { server, outbox: outboxRows });
  opened.push(store);
  return store;
};

test("a server's SQLite store has a commit watch; the CLI's has none", () => {
  const dataDir = tempDir();
  expect(open(dataDir, true).commits).toBeDefined();
  expect(open(dataDir).commits).toBeUndefined();
});

test("a write by another connection shows, and so does the server's own; a read does not", async () => {
  const dataDir = tempDir();
  const commits = open(dataDir, true).commits!;
  const other = open(dataDir);
  let mark = commits.mark();
  await other.access.listEnvironments();
  expect(commits.unchangedSince(mark)).toBe(true);
  await new Access(other.access).createEnvironment("by-another-connection");
  expect(commits.unchangedSince(mark)).toBe(false);

  mark = commits.mark();
  expect(commits.unchangedSince(mark)).toBe(true);
  await new Access(opened[0]!.access).createEnvironment("by-the-server");
  expect(commits.unchangedSince(mark)).toBe(false);
});

test("a write that rolls back counts too, and nothing is cacheable while a write is under way", () => {
  const dataDir = tempDir();
  const commits = open(dataDir, true).commits!;
  const other = open(dataDir);
  const mark = commits.mark();
  expect(() =>
    writeTransaction(other.db, (tx) => {
      tx.insert(environments).values({ slug: "rolled-back", createdAt: "now" }).run();
      // Under way: a mark taken now can never be trusted.
      expect(commits.unchangedSince(commits.mark())).toBe(false);
      throw new Error("roll back");
    }),
  ).toThrow("roll back");
  expect(commits.unchangedSince(mark)).toBe(false);
  expect(commits.unchangedSince(commits.mark())).toBe(true);
});

test("a CLI command in another process shows", async () => {
  const dataDir = tempDir();
  const commits = open(dataDir, true).commits!;
  const mark = commits.mark();
  const cli = Bun.spawn([...importdCommand, "env", "create", "by-the-cli", "--data-dir", dataDir], { cwd: projectRoot, stdout: "pipe", stderr: "pipe" });
  expect(await cli.exited).toBe(0);
  expect(commits.unchangedSince(mark)).toBe(false);
});

test("a write cut short (its process killed) stops caching until the next server start", async () => {
  const dataDir = tempDir();
  const first = open(dataDir, true);
  changeCounterOf(first.db).begun();
  expect(first.commits!.unchangedSince(first.commits!.mark())).toBe(false);
  await first.close();
  opened.length = 0;
  const next = open(dataDir, true).commits!;
  expect(next.unchangedSince(next.mark())).toBe(true);
});

// Needs root (to give the directory away); CI runs as root, so there it always runs.
test.skipIf(process.getuid?.() !== 0 && !process.env.CI)("made by root (the CLI without sudo -u), the count file belongs to the data directory's owner", () => {
  const dataDir = tempDir();
  chownSync(dataDir, 4321, 4321);
  open(dataDir);
  expect(statSync(join(dataDir, "importd.changes"))).toMatchObject({ uid: 4321, gid: 4321 });
});
