import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { postJson } from "../helpers/api";
import { fillTheDisk } from "../helpers/disk";
import { spawnServer, type ServerProcess } from "../helpers/process";
import { asset, seedReferenceData } from "../helpers/records";
import { tempDir } from "../helpers/server";
import { until } from "../helpers/until";

// importd serve --backup-dir --backup-every --backup-keep (DECISIONS 14): backups on a schedule, beside imports. The
// backup directory is a 64 MB tmpfs (room for the kept backups and the next, however many imports the machine's speed
// let in meanwhile: each adds its job and payload to the database), filled up to make backups fail; mounting needs root, which the CI machines give
// (tests/durability/disk-full.test.ts does the same).
const mountPoint = tempDir("importd-backup-schedule-");
const backupDir = join(mountPoint, "backups");
const filler = join(mountPoint, "filler");
const dataDir = tempDir("importd-backup-schedule-data-");
let server: ServerProcess | undefined;

beforeAll(() => {
  const mount = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mountPoint], { stderr: "pipe" });
  if (mount.exitCode !== 0) throw new Error(`this test mounts a small tmpfs and needs root: ${mount.stderr}`);
  mkdirSync(backupDir);
});
afterAll(() => {
  server?.proc.kill("SIGKILL");
  Bun.spawnSync(["umount", "-l", mountPoint]);
  rmSync(mountPoint, { recursive: true, force: true });
  rmSync(dataDir, { recursive: true, force: true });
});

const scheduled = /^importd-\d{8}T\d{6}\.\d{3}Z\.sqlite$/;
const metric = async (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(await (await fetch(`${server!.url}/metrics`)).text())?.[1] ?? "NaN");

test("scheduled backups: taken while imports get their 202 and /readyz stays ready, the oldest of importd's own removed beyond --backup-keep; a full backup disk is logged, counted and retried, and never stops the service", async () => {
  // Files of someone else's in the backup directory: never removed.
  writeFileSync(join(backupDir, "notes.txt"), "mine");
  writeFileSync(join(backupDir, "importd-manual.sqlite"), "mine too");
  // 0.0005 hours: every 1.8 s.
  server = await spawnServer(dataDir, ["--workers", "2", "--backup-dir", backupDir, "--backup-every", "0.0005", "--backup-keep", "2"]);
  const key = server.firstRunKey!;
  const base = `${server.url}/default`;
  await seedReferenceData(base, key);

  // Both outcomes counted from the start, at 0, so that an alert on failures sees the first one.
  expect(await metric('importd_backups_total\\{outcome="failed"\\}')).toBe(0);
  const answers: number[] = [];
  const ready: number[] = [];
  let stop = false;
  const stream = (async () => {
    for (let n = 0; !stop; n++) {
      const response = await postJson(base, "assets", key, Array.from({ length: 30 }, (_, i) => asset((n * 30 + i) % 3_000)));
      answers.push(response.status);
      await response.arrayBuffer();
      ready.push((await fetch(`${server!.url}/readyz`)).status);
    }
  })();

  await until(() => metric('importd_backups_total\\{outcome="succeeded"\\}'), { what: "three scheduled backups", holds: (n) => n >= 3, deadlineMs: 30_000 });
  const kept = readdirSync(backupDir).filter((name) => scheduled.test(name));
  expect(kept.length).toBe(2);
  expect(readdirSync(backupDir)).toEqual(expect.arrayContaining(["notes.txt", "importd-manual.sqlite"]));
  for (const name of kept) {
    const backup = new Database(join(backupDir, name), { readonly: true });
    expect(backup.query("PRAGMA integrity_check").values()).toEqual([["ok"]]);
    expect((backup.query("SELECT count(*) FROM environments").values() as number[][])[0]![0]).toBe(1);
    backup.close();
  }
  expect(await metric("importd_backup_last_success_timestamp_seconds")).toBeGreaterThan(Date.now() / 1000 - 60);
  expect(server.stderrLines.some((line) => line.includes('"msg":"backup taken"') && line.includes('"removedOld"'))).toBe(true);

  // The backup disk full: each try fails, is logged and counted, and is tried again.
  fillTheDisk(filler);
  await until(() => metric('importd_backups_total\\{outcome="failed"\\}'), { what: "two failed backups", holds: (n) => n >= 2, deadlineMs: 30_000 });
  const failure = server.stderrLines.find((line) => line.includes("backup failed; the server serves on, and tries again"));
  expect(failure).toContain("the disk is full");
  expect(JSON.parse(failure!).level).toBe("error");
  // Nothing half-written stays behind, and the kept backups are untouched.
  expect(readdirSync(backupDir).filter((name) => name.includes("importd-partial"))).toEqual([]);
  expect(readdirSync(backupDir).filter((name) => scheduled.test(name)).length).toBe(2);

  // Space again: the next try succeeds.
  const succeeded = await metric('importd_backups_total\\{outcome="succeeded"\\}');
  rmSync(filler);
  await until(() => metric('importd_backups_total\\{outcome="succeeded"\\}'), { what: "a backup once the disk has room", holds: (n) => n > succeeded, deadlineMs: 30_000 });

  stop = true;
  await stream;
  expect(answers.length).toBeGreaterThan(10);
  expect(answers.every((status) => status === 202)).toBe(true);
  expect(ready.every((status) => status === 200)).toBe(true);
  expect(server.proc.exitCode).toBeNull();

  // A stop ends the schedule with the server, cleanly.
  server.proc.kill("SIGTERM");
  expect(await server.proc.exited).toBe(0);
}, 120_000);
