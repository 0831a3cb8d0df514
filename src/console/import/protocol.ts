import type { JobDocument } from "../../client";
import type { ImportTotals } from "../../importer/chunked-import";
import type { ChunkEntry } from "../../importer/journal";
import type { Format } from "../../importer/source";

/**
 * What the page and its import worker say to each other. The page sends one order; the worker answers with the
 * survey, progress, each chunk queued (which the page keeps, so that a reload can resume), and the end.
 */

/**
 * The run an import belongs to: its id (in its requests' Idempotency-Keys), its chunks' size, and the jobs its chunks
 * went to, none for a new run; a run interrupted by a reload (or a lost server) goes on from them.
 */
export type ImportRun = { runId: string; chunkBytes: number; entries: ChunkEntry[] };

export type ImportOrder = {
  file: File;
  resource: string;
  /** Undefined: from the file's name. */
  format?: Format;
  /** Undefined: detected from the header. */
  delimiter?: string;
  ignoreUnknownColumns: boolean;
  dryRun: boolean;
  /** The environment's API root (`…/default`) and key. */
  baseUrl: string;
  apiKey: string;
  run: ImportRun;
};

/** A rejected record as the page lists it: where it stood, why, and the record as the file had it. */
export type ShownRejection = { where: string; reason: string; record: string };

export type Counts = ImportTotals & { total: number; bytesRead: number; fileBytes: number };

export type FromWorker =
  | { kind: "surveyed"; records: number; format: Format; ignored: string[] }
  | { kind: "progress"; counts: Counts }
  | { kind: "queued"; runId: string; chunkBytes: number; entry: ChunkEntry }
  | {
      kind: "done";
      counts: Counts;
      jobs: Array<Pick<JobDocument, "id" | "importJobStatus">>;
      /** The first rejections, for the page to show; all of them are in `rejectedFile`. */
      rejections: ShownRejection[];
      rejectedFile?: { blob: Blob; name: string };
    }
  | { kind: "failed"; message: string; /** The server was lost: the same import can resume. */ resumable: boolean };
