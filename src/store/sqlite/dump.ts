// The whole database for `importd storage copy` (see store/copy.ts): every table, parents before children, in
// batches, from one read transaction.
import type { Database } from "bun:sqlite";
import { getTableColumns, getTableName } from "drizzle-orm";
import type { CopySource, Row } from "../copy";
import * as schema from "./schema";

// Parents before children, so that the target's foreign keys hold after each insert.
const tablesInOrder = [
  schema.environments,
  schema.apiKeys,
  schema.jobSequences,
  schema.jobs,
  schema.jobPayloads,
  schema.jobRejections,
  schema.idempotencyKeys,
  schema.webhooks,
  schema.webhookDeliveries,
  schema.webhookAttempts,
  schema.tombstones,
  schema.syncs,
  schema.syncRecords,
  schema.subAreas,
  schema.assetTypes,
  schema.assetCategories,
  schema.assets,
];

/** The tables storage copy copies: all of this schema's. */
export const copiedTableNames = tablesInOrder.map((table) => getTableName(table));

// One batch is one INSERT on the other side: under PostgreSQL's 65,535 parameters, and a bounded amount of
// memory (a job's payload alone may be 100 MB; then it goes alone).
const maxParameters = 60_000;
const maxBatchBytes = 16 * 1024 * 1024;

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

function* batches(client: Database, name: string, columns: readonly string[]): Generator<Row[]> {
  const rowsPerBatch = Math.floor(maxParameters / columns.length);
  const statement = client.prepare(`SELECT ${columns.map(quoted).join(", ")} FROM ${quoted(name)} ORDER BY rowid`);
  try {
    let batch: Row[] = [];
    let bytes = 0;
    for (const row of statement.iterate() as IterableIterator<Row>) {
      batch.push(row);
      for (const value of Object.values(row)) bytes += value instanceof Uint8Array ? value.byteLength : typeof value === "string" ? value.length : 8;
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
