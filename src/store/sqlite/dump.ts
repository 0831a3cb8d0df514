// The whole database for `importd storage copy` (see store/copy.ts): every table, parents before children, in
// batches, from one read transaction.
import type { Database } from "bun:sqlite";
import { getTableColumns, getTableName, is } from "drizzle-orm";
import { SQLiteTable } from "drizzle-orm/sqlite-core";
import { copiedTableNames, maxBatchBytes, rowBytes, type CopySource, type Row } from "../copy";
import * as schema from "./schema";

const schemaTables = new Map<string, SQLiteTable>((Object.values(schema) as unknown[]).filter((value): value is SQLiteTable => is(value, SQLiteTable)).map((table) => [getTableName(table), table]));
// Every table of the schema is copied: a table added without a place in the copy's list is said at once.
for (const name of schemaTables.keys()) if (!(copiedTableNames as readonly string[]).includes(name)) throw new Error(`storage copy does not know the table ${name}: add it to copiedTableNames (store/copy.ts)`);
const tablesInOrder = copiedTableNames.map((name) => schemaTables.get(name)!);

// One batch is one INSERT on the other side: under PostgreSQL's 65,535 parameters, and a bounded amount of
// memory (a job's payload alone may be 100 MB; then it goes alone).
const maxParameters = 60_000;

const quoted = (name: string) => `"${name}"`;

/** Runs `copy` on one snapshot of the database; nothing written meanwhile (a key created, say) is seen. */
export async function withSnapshot<T>(client: Database, copy: (source: CopySource) => Promise<T>): Promise<T> {
  client.exec("BEGIN");
  try {
    const tables = tablesInOrder.map((table) => {
      const name = getTableName(table);
      const columns = Object.values(getTableColumns(table)).map((column) => column.name);
      const { count } = client.query(`SELECT count(*) AS count FROM ${quoted(name)}`).get() as { count: number };
      return { name, columns, rowCount: count, batches: () => batches(client, name, columns) };
    });
    const lastIds = Object.fromEntries((client.query("SELECT name, seq FROM sqlite_sequence").all() as Array<{ name: string; seq: number }>).map((row) => [row.name, row.seq]));
    return await copy({ tables, lastIds });
  } finally {
    client.exec("COMMIT");
  }
}

/** The order a table's rows are read in, the cheapest: its rowid, or the key of a table WITHOUT ROWID (tombstones). */
function keyOrder(client: Database, name: string): string {
  const { wr } = client.query("SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?1").get(name) as { wr: number };
  if (!wr) return "rowid";
  const key = (client.query("SELECT name FROM pragma_table_info(?1) WHERE pk > 0 ORDER BY pk").all(name) as Array<{ name: string }>).map((column) => quoted(column.name));
  return key.join(", ");
}

async function* batches(client: Database, name: string, columns: readonly string[]): AsyncGenerator<Row[]> {
  const rowsPerBatch = Math.floor(maxParameters / columns.length);
  const statement = client.prepare(`SELECT ${columns.map(quoted).join(", ")} FROM ${quoted(name)} ORDER BY ${keyOrder(client, name)}`);
  try {
    let batch: Row[] = [];
    let bytes = 0;
    for (const row of statement.iterate() as IterableIterator<Row>) {
      batch.push(row);
      bytes += rowBytes(row);
      if (batch.length >= rowsPerBatch || bytes >= maxBatchBytes) {
        yield batch;
        batch = [];
        bytes = 0;
      }
    }
    if (batch.length > 0) yield batch;
  } finally {
    statement.finalize();
  }
}
