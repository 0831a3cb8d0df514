// `importd storage copy` (DECISIONS 5): a stopped appliance's SQLite database, whole, into an empty PostgreSQL
// database, so that instances on PostgreSQL go on where the appliance stopped (its pending jobs included).
// The SQLite store reads (sqlite/dump.ts), the PostgreSQL store writes (postgres/fill.ts); this is the contract
// between them and the order of the steps.
import { existsSync } from "node:fs";
import { DatabaseError } from "./errors";
import { PostgresStore } from "./postgres/store";
import { databaseFile } from "./sqlite/database";
import { SqliteStore } from "./sqlite/store";

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

/**
 * Copies the database in `dataDir` into the (empty) PostgreSQL database at `databaseUrl`, in one transaction:
 * a copy that fails leaves that database as empty as it was. `onTable` hears of each table once it is copied.
 */
export async function copyToPostgres(dataDir: string, databaseUrl: string, onTable: (name: string, rows: number) => void = () => {}): Promise<CopyReport> {
  // Opening would create an empty database: a mistyped directory must be said, not copied as nothing.
  if (!existsSync(databaseFile(dataDir))) {
    throw new DatabaseError(`there is no importd database in ${dataDir} (no ${databaseFile(dataDir)}): give --data-dir the directory the appliance's server used`);
  }
  const source = SqliteStore.openStopped(dataDir);
  try {
    const target = await PostgresStore.open(databaseUrl);
    try {
      return await source.snapshot((tables) => target.fill(tables, onTable));
    } finally {
      await target.close();
    }
  } finally {
    await source.close();
  }
}
