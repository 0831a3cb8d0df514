import { closeSync, fchownSync, fstatSync, ftruncateSync, openSync, statSync } from "node:fs";
import { join } from "node:path";
import type { CommitMark, CommitWatch } from "../ports";

const fileSize = 4096;

/**
 * Counts the write transactions on a data directory's database, in a small file beside it that every
 * connection of every process (the server's threads, the CLI) maps into memory: `started` once a write
 * transaction has begun, `ended` once it has committed or rolled back. While both stay where they were, and
 * were equal, nothing was written: the server's caches (read-cache.ts) may answer from memory. Reading it costs
 * two loads from memory, where asking SQLite (a lookup, or its `data_version`) costs a read transaction, about
 * 5 µs, as much as the lookups it would spare.
 *
 * Only writes made through importd's store count (every one goes through database.ts): a database edited by hand
 * while a server runs is not seen by its caches. A process killed inside a write transaction leaves the two
 * unequal, and then nothing is cached until the server starts again (`settle`).
 */
export class ChangeCounter {
  private constructor(private readonly counts: Int32Array) {}

  static open(dataDir: string): ChangeCounter {
    const file = join(dataDir, "importd.changes");
    // Created by whichever process comes first; only ever extended, never truncated (that would crash a mapping).
    const fd = openSync(file, "a", 0o600);
    try {
      if (fstatSync(fd).size < fileSize) {
        // Made by root (a CLI command run without sudo -u), it is given to the data directory's owner, as SQLite
        // does with its -wal and -shm files: else the service's user could not open it, and would not start.
        if (process.getuid?.() === 0) {
          const owner = statSync(dataDir);
          fchownSync(fd, owner.uid, owner.gid);
        }
        ftruncateSync(fd, fileSize);
      }
    } finally {
      closeSync(fd);
    }
    const bytes = Bun.mmap(file, { shared: true });
    return new ChangeCounter(new Int32Array(bytes.buffer, bytes.byteOffset, 2));
  }

  /** Inside a write transaction, before it commits. */
  begun(): void {
    Atomics.add(this.counts, 0, 1);
  }

  /** After the transaction committed or rolled back. */
  ended(): void {
    Atomics.add(this.counts, 1, 1);
  }

  /** At a server's start, when no write of its own is under way: a write cut short before now no longer counts. */
  settle(): void {
    Atomics.store(this.counts, 1, Atomics.load(this.counts, 0));
  }

  /** What the server's caches go by. */
  readonly watch: CommitWatch = {
    mark: (): CommitMark => [Atomics.load(this.counts, 0), Atomics.load(this.counts, 1)],
    unchangedSince: (mark: CommitMark): boolean => {
      const [started, ended] = mark as [number, number];
      return started === ended && Atomics.load(this.counts, 0) === started && Atomics.load(this.counts, 1) === ended;
    },
  };
}
