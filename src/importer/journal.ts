import type { ChunkEntry } from "./chunked-import";
import { newRunId } from "./idempotency";
import { appendFileSync, existsSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";

/**
 * The progress journal of an import, `<file>.importd-progress`: the run's id and, for each chunk of the
 * file, the job that took it. An interrupted run (Ctrl-C, a crash, a lost server) leaves it behind, and
 * the same command resumes from it: chunks with a job are not sent again. A finished run removes it, so
 * the next run is a new run: new Idempotency-Keys, everything sent and applied again. Keys are derived
 * from the run id, so a chunk queued just before a crash, but not yet written here, is answered with its
 * job too (within the server's 24 hours).
 */

/** What must not change for a journal to be resumed. `mirror`: the import is a mirror (`--mirror`), its jobs in a sync. */
export type RunIdentity = { resource: string; baseUrl: string; fileBytes: number; fileModifiedMs: number; operation?: "delete"; mirror?: true };
/** `sync`: a mirror's sync, once opened, so that the resumed run joins it instead of opening another. */
type Header = RunIdentity & { runId: string; startedAt: string; chunkBytes: number; sync?: number };

export const journalPath = (input: string) => `${input}.importd-progress`;

export type Opened = {
  journal: Journal;
  /** Set when an interrupted run is resumed. */
  resumed?: { startedAt: string; chunks: number };
  /** Something the user should know about the journal found, if any. */
  note?: string;
};

export class Journal {
  private writable = true;

  private constructor(
    readonly path: string,
    readonly runId: string,
    readonly startedAt: string,
    readonly chunkBytes: number,
    private readonly entries: Map<number, ChunkEntry>,
    private header: Header,
  ) {}

  /** The sync of a mirror, once opened (by this run, or by the interrupted run it resumes). */
  get sync(): number | undefined {
    return this.header.sync;
  }

  /**
   * Notes the mirror's sync in the header, before any chunk is sent (so the header is the file's only line): the
   * resumed run of an interrupted mirror joins it, and so keeps what the interrupted run sent in it.
   */
  setSync(sync: number): void {
    this.header = { ...this.header, sync };
    if (!this.writable) return;
    writeFileSync(this.path, `${JSON.stringify(this.header)}\n`);
  }

  /** Resumes the journal of `input` if it belongs to the same run (resource, base URL, unchanged file), else starts a new one. */
  static open(input: string, identity: RunIdentity, chunkBytes: number, restart: boolean): Opened {
    const path = journalPath(input);
    const found = existsSync(path) ? read(path) : undefined;
    let note: string | undefined;
    // What the run is called in its notes: importd delete keeps its journal as importd import does.
    const what = identity.operation === "delete" ? "delete" : "import";
    if (found) {
      const { header, entries } = found;
      const mismatch =
        // A journal without an operation is an import's (journals from before deletes have none).
        header.operation !== identity.operation ? `this is ${what === "delete" ? "a delete" : "an import"}` :
        Boolean(header.mirror) !== Boolean(identity.mirror) ? (identity.mirror ? "it was not a mirror (--mirror)" : "it was a mirror (--mirror)") :
        header.resource !== identity.resource ? `it was for --resource ${header.resource}` :
        header.baseUrl !== identity.baseUrl ? `it was for ${header.baseUrl}` :
        header.fileBytes !== identity.fileBytes || header.fileModifiedMs !== identity.fileModifiedMs ? "the file has changed since" : undefined;
      if (restart) note = `--restart: the ${what} of this file interrupted on ${header.startedAt} is not resumed; sending everything again.`;
      else if (mismatch) note = `An interrupted ${header.operation === "delete" ? "delete" : "import"} of this file (started ${header.startedAt}) is not resumed, because ${mismatch}: starting a new ${what}.`;
      else {
        const journal = new Journal(path, header.runId, header.startedAt, header.chunkBytes, entries, header);
        if (chunkBytes !== header.chunkBytes) note = `Resuming with the interrupted run's --chunk-bytes ${header.chunkBytes}, so that its chunks are the same.`;
        return { journal, resumed: { startedAt: header.startedAt, chunks: entries.size }, note };
      }
    }
    const header: Header = { ...identity, runId: newRunId(), startedAt: new Date().toISOString(), chunkBytes };
    const journal = new Journal(path, header.runId, header.startedAt, chunkBytes, new Map(), header);
    try {
      writeFileSync(path, `${JSON.stringify(header)}\n`);
    } catch (error) {
      journal.writable = false;
      note = `${note ? `${note} ` : ""}Cannot write ${path} (${(error as Error).message}): if this ${what} is interrupted, running it again sends everything again.`;
    }
    return { journal, note };
  }

  /** The job an earlier, interrupted run of this import queued for chunk `chunk`, if any. */
  entry(chunk: number): ChunkEntry | undefined {
    return this.entries.get(chunk);
  }

  record(entry: ChunkEntry): void {
    if (!this.writable) return;
    // Appended synchronously once the 202 is in: a crash after it loses at most this line, and then the
    // chunk's Idempotency-Key answers its job.
    appendFileSync(this.path, `${JSON.stringify(entry)}\n`);
  }

  /**
   * Every chunk has its outcome, or the run stopped for a reason that would stop it again (the file, a refused
   * key): the next run of the command is a new import, without a note about this one.
   */
  finish(): void {
    rmSync(this.path, { force: true });
  }
}

/** The journal as written; a line torn by a crash is ignored. An unreadable journal counts as none. */
function read(path: string): { header: Header; entries: Map<number, ChunkEntry> } | undefined {
  try {
    if (statSync(path).size > 64 * 1024 * 1024) return undefined;
    const [first, ...rest] = readFileSync(path, "utf8").split("\n");
    const header = JSON.parse(first!) as Header;
    if (typeof header.runId !== "string" || typeof header.chunkBytes !== "number") return undefined;
    const entries = new Map<number, ChunkEntry>();
    for (const line of rest) {
      try {
        const entry = JSON.parse(line) as ChunkEntry;
        if (Number.isInteger(entry.chunk)) entries.set(entry.chunk, entry);
      } catch {
        // The torn last line of a crash.
      }
    }
    return { header, entries };
  } catch {
    return undefined;
  }
}
