// `importd storage copy` (DECISIONS 5): a stopped appliance's SQLite database, whole, into an empty PostgreSQL
// database, so that instances on PostgreSQL go on where the appliance stopped (its pending jobs included).
// The SQLite store reads (sqlite/dump.ts), the PostgreSQL store writes (postgres/fill.ts); this is the contract
// between them. The storage command (cli/storage-command.ts) opens both and hands the one to the other.

/** A row as both databases name its columns. */
export type Row = Record<string, unknown>;

/** One table of the source, read from the same snapshot as the others. */
export type SourceTable = {
  name: string;
  columns: readonly string[];
  rowCount: number;
  /** Its rows in batches small enough for one statement each. */
  batches(): Iterable<Row[]>;
};

export type CopySource = {
  /** Every table, parents before children. */
  tables: readonly SourceTable[];
  /** The last id each table with generated ids has handed out, purged rows included: never to be handed out again. */
  lastIds: Readonly<Record<string, number>>;
};

/** Rows copied, by table. */
export type CopyReport = Record<string, number>;
