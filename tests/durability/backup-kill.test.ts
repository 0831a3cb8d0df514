import { Database } from "bun:sqlite";
import { afterAll, expect, test } from "bun:test";
import { existsSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { databaseFile } from "../../src/store/sqlite/database";
import { postJson, waitForJob } from "../helpers/api";
import { importd, projectRoot, spawnServer, type ServerProcess, importdCommand } from "../helpers/process";
import { seededRandom } from "../helpers/random";
import { asset, seedReferenceData } from "../helpers/records";
import { tempDir } from "../helpers/server";

// `importd storage backup` SIGKILLed at random moments while the server takes imports (DECISIONS 14): nothing ever
// appears at the target name, the data directory is left as it was, the server serves on, and what a killed backup
// left beside the target (named for importd and its process) is removed by the next backup, which succeeds.
// A kill test of its own rather than a kill point of tests/durability/crash.test.ts: that one kills the server; here
// the server must survive and it is the backup that dies.

const kills = Number(process.env.BACKUP_KILLS ?? 8);
const next = seededRandom(Number(process.env.BACKUP_KILL_SEED ?? 20261127));
const root = tempDir("importd-backup-kill-");
const dataDir = join(root, "data");
const backups = join(root, "backups");
let server: ServerProcess | undefined;
afterAll(() => {
  server?.proc.kill("SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

const spawnBackup = (target: string) =>
  Bun.spawn([...importdCommand, "storage", "backup", "--data-dir", dataDir, "--to", target], { cwd: projectRoot, stdin: "ignore", stdout: "pipe", stderr: "pipe" });

test(`SIGKILL at ${kills} random moments of a backup beside a server taking imports: nothing at the target, the data directory untouched, the server serves on, the next backup cleans up and succeeds`, async () => {
  server = await spawnServer(dataDir, ["--workers", "2"]);
  const key = server.firstRunKey!;
  const base = `${server.url}/default`;
  await seedReferenceData(base, key);
  // Some tens of MB, so that VACUUM INTO takes long enough to be killed in the middle.
  for (let batch = 0; batch < 4; batch++) {
    const response = await postJson(base, "assets", key, Array.from({ length: 15_000 }, (_, i) => asset(batch * 15_000 + i)));
    expect(response.status).toBe(202);
    expect((await waitForJob(base, key, ((await response.json()) as { id: number }).id)).importJobStatus).toBe("Succeeded");
  }
  const dataFiles = readdirSync(dataDir).sort();
  Bun.spawnSync(["mkdir", "-p", backups]);

  // How long a whole backup takes here, to kill the others anywhere along it.
  const timed = performance.now();
  const whole = await importd(["storage", "backup", "--data-dir", dataDir, "--to", join(backups, "whole.sqlite")]);
  const wholeMs = performance.now() - timed;
  expect(whole.code).toBe(0);

  const answers: number[] = [];
  let stop = false;
  const stream = (async () => {
    for (let n = 0; !stop; n++) {
      const response = await postJson(base, "assets", key, Array.from({ length: 50 }, (_, i) => asset(100_000 + ((n * 50 + i) % 20_000))));
      answers.push(response.status);
      await response.arrayBuffer();
    }
  })();

  const target = join(backups, "importd.sqlite");
  let leftBehind = 0;
  const killed: number[] = [];
  for (let kill = 0; kill < kills; kill++) {
    const backup = spawnBackup(target);
    if (kill % 2 === 0) {
      // Every other kill inside VACUUM INTO, once its file is there: on a quiet machine the process's start is most of
      // a backup of this size, and kills at random moments along it could all miss the copy.
      const partial = join(backups, `importd.sqlite.importd-partial-${backup.pid}`);
      const deadline = performance.now() + 4 * wholeMs + 5_000;
      while (!existsSync(partial) && backup.exitCode === null && performance.now() < deadline) await Bun.sleep(1);
      await Bun.sleep(next() * 10);
    } else await Bun.sleep(next() * wholeMs * 0.9);
    backup.kill("SIGKILL");
    await backup.exited;
    killed.push(backup.pid);
    // A kill after the rename would be a finished backup: then it is whole, and it is moved out of the way.
    if (existsSync(target)) {
      const check = new Database(target, { readonly: true });
      expect(check.query("PRAGMA integrity_check").values()).toEqual([["ok"]]);
      check.close();
      rmSync(target);
    }
    const partials = readdirSync(backups).filter((name) => name.startsWith("importd.sqlite.importd-partial-"));
    // Only ever under its own name (one a killed backup of this test made), never the target's.
    // (VACUUM INTO's own rollback journal beside it, <partial>-journal, too.)
    expect(partials.filter((name) => !killed.some((pid) => new RegExp(`^importd\\.sqlite\\.importd-partial-${pid}(-journal)?$`).test(name)))).toEqual([]);
    leftBehind += partials.length;
    expect(readdirSync(dataDir).sort()).toEqual(dataFiles);
  }
  stop = true;
  await stream;
  expect(answers.every((status) => status === 202)).toBe(true);
  // Most kills land inside VACUUM INTO; if none did, the test proved nothing about a half-written file.
  expect(leftBehind).toBeGreaterThan(0);

  const last = await importd(["storage", "backup", "--data-dir", dataDir, "--to", target]);
  expect(last.code).toBe(0);
  expect(readdirSync(backups).sort()).toEqual(["importd.sqlite", "whole.sqlite"]);

  // The server serves on, and its database is whole.
  expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
  const response = await postJson(base, "assets", key, [asset(999_999)]);
  expect(response.status).toBe(202);
  expect((await waitForJob(base, key, ((await response.json()) as { id: number }).id)).importJobStatus).toBe("Succeeded");
  const live = new Database(databaseFile(dataDir), { readonly: true });
  expect(live.query("PRAGMA integrity_check").values()).toEqual([["ok"]]);
  live.close();
}, 180_000);
