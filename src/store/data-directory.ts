import { chmodSync, closeSync, existsSync, lstatSync, mkdirSync, openSync, readdirSync } from "node:fs";
import { join } from "node:path";

/**
 * The data directory is this user's alone: it holds the database (webhook signing secrets, key hashes, every
 * environment's records), the lock and the self-signed TLS key. So it is 0700 and what importd makes in it 0600,
 * whatever the umask (found: 0755 and 0644 outside systemd, the webhook secrets readable by `nobody`).
 */
export const directoryMode = 0o700;
export const fileMode = 0o600;

const looser = (mode: number, wanted: number) => (mode & 0o777 & ~wanted) !== 0;
const octal = (mode: number) => `0${(mode & 0o777).toString(8)}`;

/** Makes `dir` 0700 if it is missing (its missing parents too); one that exists is left as it is (see tighten). */
export function privateDirectory(dir: string): void {
  if (existsSync(dir)) return;
  mkdirSync(dir, { recursive: true, mode: directoryMode });
  // The mode again: the umask may have taken bits away from mkdir's, never added them; this is the mode wanted.
  chmodSync(dir, directoryMode);
}

/**
 * Makes `file` empty and 0600 if it is missing, before a library (SQLite) opens it: SQLite gives its -wal, -shm
 * and -journal files the mode of their database file. One that exists is left as it is.
 */
export function privateFile(file: string): void {
  // Appending opens nothing away: an existing file keeps its content (and its mode).
  closeSync(openSync(file, "a", fileMode));
}

/**
 * Takes group and other permissions away from the data directory, its tls folder and every file of this user's in
 * either (as an older importd, or a umask of 022, left them). Answers what it changed, `path mode → mode`, for the
 * log; what it could not change (not this user's) is left and said too.
 */
export function tightenDataDirectory(dataDir: string): { changed: string[]; failed: string[] } {
  const changed: string[] = [];
  const failed: string[] = [];
  const tighten = (path: string, wanted: number) => {
    const stat = lstatSync(path, { throwIfNoEntry: false });
    if (!stat || stat.isSymbolicLink() || !looser(stat.mode, wanted)) return;
    if (stat.uid !== process.getuid?.()) {
      failed.push(`${path} ${octal(stat.mode)}`);
      return;
    }
    try {
      chmodSync(path, stat.mode & wanted & 0o777);
      changed.push(`${path} ${octal(stat.mode)} → ${octal(stat.mode & wanted)}`);
    } catch {
      failed.push(`${path} ${octal(stat.mode)}`);
    }
  };
  const walk = (dir: string, depth: number) => {
    tighten(dir, directoryMode);
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isFile()) tighten(path, fileMode);
      else if (entry.isDirectory() && depth > 0) walk(path, depth - 1);
    }
  };
  // A shared directory (sticky, as /tmp) is no data directory to take over: said, not changed.
  const top = lstatSync(dataDir, { throwIfNoEntry: false });
  if (top && (top.mode & 0o1000) !== 0) failed.push(`${dataDir} ${octal(top.mode)} (a shared directory: give importd a directory of its own)`);
  else if (top) walk(dataDir, 1);
  return { changed, failed };
}
