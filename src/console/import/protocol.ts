import type { JobDocument } from "../../client";
import type { ChunkEntry, ImportTotals } from "../../importer/chunked-import";
import type { Format } from "../../importer/source";

/**
 * What the page and its import worker say to each other. The page sends one order; the worker answers with the
 * survey, progress, each chunk queued (which the page keeps, so that a reload can resume), and the end.
 */

/** How a file is imported: the person's choices on the import screen. */
export type ImportSettings = {
  resource: string;
  /** Undefined: from the file's name. */
  format?: Format;
  /** Undefined: detected from the header. */
  delimiter?: string;
  ignoreUnknownColumns: boolean;
  /** Mirror: the file is sent in a sync, whose completion deletes the records of the resource the file does not have. */
  mirror: boolean;
};

/** Just the settings of something that has them (a choice, a saved import), to pass on. */
export const settingsOf = ({ resource, format, delimiter, ignoreUnknownColumns, mirror }: ImportSettings): ImportSettings => ({ resource, format, delimiter, ignoreUnknownColumns, mirror: mirror ?? false });

/**
 * The run an import belongs to: its id (in its requests' Idempotency-Keys), its chunks' size, and the jobs its chunks
 * went to, none for a new run; a run interrupted by a reload (or a lost server) goes on from them.
 */
export type RunLedger = {
  runId: string;
  chunkBytes: number;
  entries: ChunkEntry[];
  /** A mirror's sync, once opened: a resumed mirror joins it. */
  sync?: number;
  /** A mirror's limit: the records its dry run considered, which the person saw before applying. */
  maxDelete?: number;
};

export type ImportOrder = ImportSettings & {
  file: File;
  dryRun: boolean;
  /** The environment (for messages), its API root (`…/default`) and key. */
  environment: string;
  baseUrl: string;
  apiKey: string;
  run: RunLedger;
};

/**
 * A mirror's end. A dry run: the file went as dry runs in a sync of its own, which a dry-run completion (`job`) then
 * counted from, as importd import --mirror --dry-run does: `wouldDelete` of the `considered` records importd has that
 * no job of the sync sent and no other job wrote (the rest of those `rejected`: other records refer to them), exactly;
 * undefined when it could not be counted (a record refused before any job took it), `message` saying why. `overLimit`:
 * the server's words when its default limit stops that many (a second dry-run completion, allowing them, counted).
 * Applied: the completion job and its output, or no job and a message saying why it was not queued.
 */
export type MirrorEnd =
  | { dryRun: true; sync: number; job?: JobRef; wouldDelete?: number; considered: number; rejected: number; message: string; overLimit?: string }
  | { dryRun: false; sync: number; job?: JobRef; deleted: number; rejected: number; message: string };

type JobRef = Pick<JobDocument, "id" | "importJobStatus">;

/** A rejected record as the page lists it: where it stood, why, and the record as the file had it. */
export type ShownRejection = { where: string; reason: string; record: string };

export type Counts = ImportTotals & { total: number; bytesRead: number; fileBytes: number };

export type FromWorker =
  | { type: "surveyed"; records: number; ignored: string[] }
  | { type: "progress"; counts: Counts }
  | { type: "queued"; chunkBytes: number; entry: ChunkEntry }
  | { type: "sync"; sync: number }
  | {
      type: "done";
      counts: Counts;
      jobs: Array<Pick<JobDocument, "id" | "importJobStatus">>;
      /** Columns (or fields) not imported, as asked ("Ignore unknown columns"). */
      ignored: string[];
      /** The first rejections, for the page to show; all of them are in `rejectedFile`. */
      rejections: ShownRejection[];
      rejectedFile?: { blob: Blob; name: string };
      /** A mirror's: what its dry-run completion says it would delete, or what its completion did (or why it did not). */
      mirror?: MirrorEnd;
    }
  | { type: "failed"; message: string; /** What was queued is kept: the same file can resume. */ resumable: boolean };
