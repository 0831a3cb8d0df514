// `importd storage copy` (DECISIONS 5 and 14): a whole importd database from one backend into an empty one of the other.
// Up: a stopped appliance's SQLite database into PostgreSQL, so that instances there go on where the appliance stopped
// (its pending jobs included); the SQLite store reads (sqlite/dump.ts), the PostgreSQL store writes (postgres/fill.ts).
// Down (or out): a PostgreSQL database into a new SQLite data directory; postgres/dump.ts reads, sqlite/fill.ts writes.
// This is the contract between them; the storage command (cli/storage-command.ts) opens both and hands one to the other.

/** A row as both databases name its columns. */
export type Row = Record<string, unknown>;

/**
 * Every table storage copy copies, parents before children (so that the target's foreign keys hold after each insert):
 * all of the SQLite schema's, which PostgreSQL's has too (tests/store/schema-parity.test.ts).
 */
export const copiedTableNames = [
  "environments",
  "api_keys",
  "job_sequences",
  "jobs",
  "job_payloads",
  "job_rejections",
  "idempotency_keys",
  "webhooks",
  "webhook_deliveries",
  "webhook_attempts",
  "tombstones",
  "syncs",
  "sync_records",
  "sub_areas",
  "asset_types",
  "asset_categories",
  "assets",
] as const;

/** One table of the source, read from the same snapshot as the others. */
export type SourceTable = {
  name: string;
  columns: readonly string[];
  rowCount: number;
  /** Its rows in batches small enough for one statement each, and for memory (a job's payload alone may be 100 MB). */
  batches(): AsyncIterable<Row[]>;
};

export type CopySource = {
  /** Every table, parents before children. */
  tables: readonly SourceTable[];
  /** The last id each table with generated ids has handed out, purged rows included: never to be handed out again. */
  lastIds: Readonly<Record<string, number>>;
};

/** Rows copied, by table. */
export type CopyReport = Record<string, number>;

/** Told of each table once it is written, in the copy's transaction; awaited, so a caller may hold the copy there. */
export type OnTable = (name: string, rows: number) => void | Promise<void>;

/** A batch of rows this big (about) is enough: the next one is read. */
export const maxBatchBytes = 16 * 1024 * 1024;

/** About how much memory a row's values take. */
export function rowBytes(row: Row): number {
  let bytes = 0;
  for (const value of Object.values(row)) bytes += value instanceof Uint8Array ? value.byteLength : typeof value === "string" ? value.length : 8;
  return bytes;
}

/** The target's count of a table's rows, checked against the source's: a copy that lost or doubled rows is not committed. */
export function checkCopied(table: SourceTable, written: number): void {
  if (written !== table.rowCount) throw new Error(`storage copy: ${table.rowCount} rows of ${table.name} read, ${written} written; nothing was committed`);
}
