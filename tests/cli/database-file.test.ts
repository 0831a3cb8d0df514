import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, existsSync, openSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { closeDatabase, databaseFile, migrate, openDatabase } from "../../src/store/sqlite/database";
import { embeddedMigrations } from "../../src/store/sqlite/migrations";
import { importd } from "../helpers/process";
import { tempDir } from "../helpers/server";

const dirs: string[] = [];
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
const dataDir = () => {
  const dir = tempDir("importd-dbfile-");
  dirs.push(dir);
  return dir;
};

/** A data directory holding a real importd database, with one environment. */
function importdDatabase(): string {
  const dir = dataDir();
  const db = openDatabase(dir);
  migrate(db);
  db.$client.exec("INSERT INTO environments (slug, created_at) VALUES ('acme', '2026-01-01T00:00:00.000Z')");
  closeDatabase(db, { checkpoint: true });
  return dir;
}

const fingerprint = (file: string) => new Bun.CryptoHasher("sha256").update(readFileSync(file)).digest("hex");

/** Runs `serve` and a CLI command on the directory: each must refuse with one line and leave the file as it was. */
async function expectRefused(dir: string, reason: string) {
  const file = databaseFile(dir);
  const before = fingerprint(file);
  for (const args of [["serve", "--port", "0", "--host", "127.0.0.1"], ["env", "list"]]) {
    const run = await importd([...args, "--data-dir", dir]);
    expect(run.code).toBe(1);
    const lines = run.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toStartWith(`importd: ${file} ${reason}`);
    expect(lines[0]).toEndWith("importd has not changed it: restore it from a backup, or move it away to start with an empty database.");
    expect(run.stdout).not.toMatch(/[0-9a-f]{64}_\d+/);
  }
  expect(fingerprint(file)).toBe(before);
  // Nothing waits in a WAL to be written into it either. (SQLite may leave an empty -wal and a -shm behind
  // when another connection, such as this test's own fixture, still has the file open.)
  expect(existsSync(`${file}-wal`) ? statSync(`${file}-wal`).size : 0).toBe(0);
}

describe("a database file importd cannot use is refused at start-up, never overwritten or repaired", () => {
  test("random bytes", async () => {
    const dir = dataDir();
    writeFileSync(databaseFile(dir), crypto.getRandomValues(new Uint8Array(16_384)));
    await expectRefused(dir, "is not an SQLite database, or its header is damaged");
  }, 30_000);

  test("an importd database whose header was overwritten", async () => {
    const dir = importdDatabase();
    const fd = openSync(databaseFile(dir), "r+");
    writeSync(fd, new Uint8Array(16).fill(0x41), 0, 16, 0);
    closeSync(fd);
    await expectRefused(dir, "is not an SQLite database, or its header is damaged");
  }, 30_000);

  test("an importd database whose pages after the first were overwritten", async () => {
    const dir = importdDatabase();
    const file = databaseFile(dir);
    const bytes = readFileSync(file);
    bytes.fill(0xff, 4096);
    writeFileSync(file, bytes);
    await expectRefused(dir, "is damaged (SQLite reports corruption)");
  }, 30_000);

  test("another application's SQLite database", async () => {
    const dir = dataDir();
    const other = new Database(databaseFile(dir), { create: true });
    other.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers (name) VALUES ('Ada');");
    other.close();
    await expectRefused(dir, "was not created by importd (it holds the tables customers)");
    const again = new Database(databaseFile(dir), { readonly: true });
    expect(again.query("SELECT name FROM sqlite_master WHERE type = 'table'").all()).toEqual([{ name: "customers" }]);
    expect(again.query("PRAGMA journal_mode").get()).toEqual({ journal_mode: "delete" });
    again.close();
  }, 30_000);

  test("a database migrated by a newer importd", async () => {
    const dir = importdDatabase();
    const db = new Database(databaseFile(dir));
    db.exec("INSERT INTO __drizzle_migrations (hash, created_at) VALUES ('from-a-newer-version', 9999999999999)");
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    db.close();
    const known = embeddedMigrations().length;
    await expectRefused(dir, `was migrated by a newer importd (${known + 1} migrations; this importd knows ${known}): run the newer importd`);
  }, 30_000);

  test("an empty file is a new database: importd creates its tables in it", async () => {
    const dir = dataDir();
    writeFileSync(databaseFile(dir), "");
    const run = await importd(["env", "create", "fresh", "--data-dir", dir]);
    expect(run.code).toBe(0);
    expect((await importd(["env", "list", "--data-dir", dir])).stdout).toStartWith("fresh\t");
  }, 30_000);
});
