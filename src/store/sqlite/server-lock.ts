import { Database } from "bun:sqlite";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { fileMode, privateDirectory, privateFile } from "../data-directory";
import { join } from "node:path";
import { StoreInUse } from "../errors";

/**
 * One server per data directory: the scheduler, the write lock between threads and the parse-once cache
 * all assume that no other process applies this database's jobs, and a second server's start-up would put
 * the first one's running jobs back in the queue.
 *
 * The lock is an exclusive lock on an empty SQLite file, held for as long as the server runs. SQLite takes
 * it with an fcntl() lock, which the kernel drops when the process ends however it ends, so a server killed
 * with SIGKILL leaves nothing that stops the next start (a PID file alone would, or would be taken over by
 * an unrelated process that got the same PID). The PID beside it is only for the message.
 * The env and key commands do not take it: they work beside a running server.
 */

export type ServerLock = { release(): void };

/** `hint`: what the person should do about a running server, said after the refusal. */
export function lockDataDirectory(dataDir: string, hint = "stop it first, or start this one with another --data-dir (the env and key commands work beside a running server)"): ServerLock {
  privateDirectory(dataDir);
  const lockFile = join(dataDir, "server.lock");
  const pidFile = join(dataDir, "server.pid");
  privateFile(lockFile);
  const lock = new Database(lockFile, { create: true });
  try {
    lock.exec("PRAGMA busy_timeout = 0");
    lock.exec("BEGIN EXCLUSIVE");
  } catch (error) {
    lock.close();
    if ((error as { code?: string }).code !== "SQLITE_BUSY") throw error;
    throw new StoreInUse(
      `another importd server${runningPid(pidFile)} is already running on the data directory ${dataDir}; ${hint}`,
    );
  }
  writeFileSync(pidFile, `${process.pid}\n`, { mode: fileMode });
  return {
    release() {
      rmSync(pidFile, { force: true });
      lock.exec("ROLLBACK");
      lock.close();
    },
  };
}

function runningPid(pidFile: string): string {
  try {
    const pid = readFileSync(pidFile, "utf8").trim();
    return /^\d+$/.test(pid) ? ` (pid ${pid})` : "";
  } catch {
    // It is written just after the lock is taken: a server starting this very moment may not have it yet.
    return "";
  }
}
