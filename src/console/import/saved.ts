import type { ChunkEntry } from "../../importer/chunked-import";
import type { ImportSettings, RunLedger } from "./protocol";

/**
 * An import being applied, kept in the tab's session storage from its start to its end: what a reload in the middle
 * needs to say what was sent, and to send the rest without sending anything twice. A browser cannot open a file by
 * itself after a reload, so the person chooses it again; it must be the same file (name, size, time), unchanged.
 * Only the file's name and the jobs' ids are kept, no record and no key.
 */
export type SavedImport = ImportSettings & {
  environment: string;
  file: { name: string; size: number; lastModified: number };
  startedAt: string;
  records: number;
  run: RunLedger;
};

const storageKey = "importd.import";

export function savedImport(environment: string): SavedImport | undefined {
  try {
    const saved = JSON.parse(sessionStorage.getItem(storageKey) ?? "null") as SavedImport | null;
    return saved?.environment === environment && Array.isArray(saved.run?.entries) ? saved : undefined;
  } catch {
    return undefined;
  }
}

/** False when the storage is full: a reload would then send the whole file again (each request is a new job). */
export function keepImport(saved: SavedImport): boolean {
  try {
    sessionStorage.setItem(storageKey, JSON.stringify(saved));
    return true;
  } catch {
    return false;
  }
}

export function forgetImport(): void {
  sessionStorage.removeItem(storageKey);
}

export const isSameFile = (saved: SavedImport, file: File) => saved.file.name === file.name && saved.file.size === file.size && saved.file.lastModified === file.lastModified;

/** The job a chunk went to; and the chunks' size, which the worker makes smaller for a server that refuses big requests. */
export function withEntry(saved: SavedImport, chunkBytes: number, entry: ChunkEntry): SavedImport {
  return { ...saved, run: { ...saved.run, chunkBytes, entries: [...saved.run.entries.filter(({ chunk }) => chunk !== entry.chunk), entry] } };
}
