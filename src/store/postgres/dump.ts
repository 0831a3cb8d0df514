// The whole database for `importd storage copy --from` (see store/copy.ts): every table, parents before children, read
// from one snapshot (a REPEATABLE READ, READ ONLY transaction on a connection of its own) through a cursor per table, so
// that memory holds one batch whatever the database's size. It only reads: instances may go on serving meanwhile.
import { getTableColumns, getTableName, is } from "drizzle-orm";
import { getTableConfig, PgTable } from "drizzle-orm/pg-core";
import pg from "pg";
import { copiedTableNames, maxBatchBytes, rowBytes, type CopySource, type Row, type SourceTable } from "../copy";
import { DatabaseError } from "../errors";
import { deadlines, openClient } from "./connection";
import { connectionProblem } from "./faults";
import { appliedMigrations, embeddedMigrations } from "./migrations";
import * as schema from "./schema";
import { identityColumns } from "./schema";

const schemaTables = new Map<string, PgTable>((Object.values(schema) as unknown[]).filter((value): value is PgTable => is(value, PgTable)).map((table) => [getTableName(table), table]));

// Rows per FETCH: from one, then grown or shrunk so that a batch holds about maxBatchBytes (a payload may be 100 MB).
const maxRowsPerFetch = 5_000;

/**
 * Runs `copy` on one snapshot of the importd database at `url`, which must have exactly this importd's migrations (a
 * newer importd's database, or an older one's, whose tables differ, is refused: nothing there is migrated or written).
 */
export async function withPostgresSnapshot<T>(url: string, copy: (source: CopySource) => Promise<T>): Promise<T> {
  const client = openClient(url, { statementMs: deadlines.bulkStatementMs });
  try {
    await client.connect();
    await checkMigrated(client);
    await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    const tables: SourceTable[] = [];
    for (const name of copiedTableNames) {
      const table = schemaTables.get(name);
      if (!table) throw new Error(`the PostgreSQL schema has no table ${name}, which storage copy copies`);
      const columns = Object.values(getTableColumns(table)).map((column) => column.name);
      const [{ count }] = (await client.query<{ count: number }>(`SELECT count(*)::bigint AS count FROM ${quoted(name)}`)).rows as [{ count: number }];
      tables.push({ name, columns, rowCount: count, batches: () => batches(client, table, columns) });
    }
    // Read after the counts: a sequence is outside the snapshot, and is only ever further on.
    const lastIds: Record<string, number> = {};
    for (const [name, column] of Object.entries(identityColumns)) {
      const [{ last }] = (await client.query<{ last: number | null }>({ text: "SELECT pg_sequence_last_value(pg_get_serial_sequence($1, $2)) AS last", values: [name, column] })).rows as [{ last: number | null }];
      if (last !== null) lastIds[name] = last;
    }
    return await copy({ tables, lastIds });
  } catch (error) {
    // A connection lost or a statement refused part-way, said as the driver's errors are said elsewhere.
    throw connectionProblem(error, url);
  } finally {
    await client.end().catch(() => {});
  }
}

async function checkMigrated(client: pg.Client): Promise<void> {
  const applied = await appliedMigrations(client);
  const known = embeddedMigrations().length;
  if (applied === 0) throw new DatabaseError("the database holds no importd data (importd has never run on it): there is nothing to copy");
  if (applied < known) {
    throw new DatabaseError(`the database was migrated by an older importd (${applied} migrations; this importd knows ${known}): start this importd's server on it once (it migrates the database), or copy with the importd that runs on it`);
  }
}

const quoted = pg.escapeIdentifier;

async function* batches(client: pg.Client, table: PgTable, columns: readonly string[]): AsyncGenerator<Row[]> {
  const name = getTableName(table);
  const config = getTableConfig(table);
  const key = config.primaryKeys[0]?.columns.map((column) => column.name) ?? config.columns.filter((column) => column.primary).map((column) => column.name);
  const cursor = quoted(`importd_copy_${name}`);
  await client.query(`DECLARE ${cursor} NO SCROLL CURSOR FOR SELECT ${columns.map(quoted).join(", ")} FROM ${quoted(name)} ORDER BY ${key.map(quoted).join(", ")}`);
  try {
    for (let rows = 1; ; ) {
      const batch = (await client.query<Row>(`FETCH ${rows} FROM ${cursor}`)).rows;
      if (batch.length > 0) yield batch;
      if (batch.length < rows) return;
      const bytes = batch.reduce((sum, row) => sum + rowBytes(row), 0);
      rows = Math.max(1, Math.min(maxRowsPerFetch, Math.floor((rows * maxBatchBytes) / Math.max(bytes, 1))));
    }
  } finally {
    // Not in an aborted transaction (a failed FETCH): its error is the one to tell.
    await client.query(`CLOSE ${cursor}`).catch(() => {});
  }
}
