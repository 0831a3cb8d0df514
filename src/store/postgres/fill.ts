// Filling an empty database with another store's data, for `importd storage copy` (see store/copy.ts).
import pg from "pg";
import { checkCopied, type CopyReport, type CopySource, type OnTable, type Row } from "../copy";
import { DatabaseError } from "../errors";
import { deadlines, inTransaction } from "./connection";
import { answer } from "./faults";
import { identityColumns } from "./schema";


/**
 * Inserts every table of `source` in one transaction, after checking, under a lock that keeps instances from
 * writing meanwhile, that the database holds no importd data. Counts each table afterwards against the source,
 * and sets the generated ids to carry on after the source's last ones (purged jobs' ids included).
 */
export function fillEmptyDatabase(pool: pg.Pool, source: CopySource, onTable: OnTable): Promise<CopyReport> {
  return answer(() =>
    inTransaction(pool, async (tx) => {
      const names = source.tables.map((table) => table.name);
      // An instance started on this database meanwhile waits here, and finds the data when the copy commits.
      await tx.query(`LOCK TABLE ${names.map(quoted).join(", ")} IN EXCLUSIVE MODE`);
      const occupied = (await tx.query<{ name: string }>(names.map((name) => `SELECT '${name}' AS name WHERE EXISTS (SELECT 1 FROM ${quoted(name)})`).join(" UNION ALL "))).map((row) => row.name);
      if (occupied.length > 0) {
        throw new DatabaseError(
          `the database already holds importd data (in ${occupied.join(", ")}); storage copy fills only an empty database, so that nothing there is mixed with or overwritten by the appliance's. Copy into a new database (CREATE DATABASE …) before any instance has started on it.`,
        );
      }
      const report: CopyReport = {};
      for (const table of source.tables) {
        for await (const batch of table.batches()) await tx.query(insertRows(table.name, table.columns, batch));
        const [{ count }] = (await tx.query<{ count: number }>(`SELECT count(*)::bigint AS count FROM ${quoted(table.name)}`)) as [{ count: number }];
        checkCopied(table, count);
        report[table.name] = count;
        await onTable(table.name, count);
      }
      for (const [name, column] of Object.entries(identityColumns)) {
        const last = source.lastIds[name] ?? 0;
        await tx.query({
          text: `SELECT setval(pg_get_serial_sequence($1, $2), next) FROM (SELECT greatest($3::bigint, coalesce(max(${quoted(column)}), 0)) AS next FROM ${quoted(name)}) AS ids WHERE next > 0`,
          values: [name, column, last],
        });
      }
      return report;
    }),
  );
}

const quoted = pg.escapeIdentifier;

/** One INSERT of a batch of rows (the source keeps a batch under PostgreSQL's 65,535 parameters). */
function insertRows(table: string, columns: readonly string[], rows: Row[]): pg.QueryConfig {
  const values: unknown[] = [];
  const tuples = rows.map((row) => `(${columns.map((column) => `$${values.push(row[column] ?? null)}`).join(", ")})`);
  return { text: `INSERT INTO ${quoted(table)} (${columns.map(quoted).join(", ")}) VALUES ${tuples.join(", ")}`, values, query_timeout: deadlines.bulkStatementMs } as pg.QueryConfig;
}
