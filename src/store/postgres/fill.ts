// Filling an empty database with another store's data, for `importd storage copy` (see store/copy.ts).
import type { CopyReport, CopySource } from "../copy";
import { DatabaseError } from "../errors";
import type { Sql } from "./connection";
import { translateFault } from "./faults";
import type { TransactionConnections } from "./transactions";

// The tables whose ids PostgreSQL generates (identity columns), and that the copy must carry on from.
const identityTables = ["environments", "api_keys", "jobs"];

/**
 * Inserts every table of `source` in one transaction, after checking, under a lock that keeps instances from
 * writing meanwhile, that the database holds no importd data. Counts each table afterwards against the source,
 * and sets the generated ids to carry on after the source's last ones (purged jobs' ids included).
 */
export async function fillEmptyDatabase(transactions: TransactionConnections, source: CopySource, onTable: (name: string, rows: number) => void): Promise<CopyReport> {
  const transaction = await transactions.begin();
  const sql = transaction.sql;
  try {
    const names = source.tables.map((table) => table.name);
    // An instance started on this database meanwhile waits here, and finds the data when the copy commits.
    await sql.unsafe(`LOCK TABLE ${names.map((name) => `"${name}"`).join(", ")} IN EXCLUSIVE MODE`);
    const occupied = await tablesWithRows(sql, names);
    if (occupied.length > 0) {
      throw new DatabaseError(
        `the database already holds importd data (in ${occupied.join(", ")}); storage copy fills only an empty database, so that nothing there is mixed with or overwritten by the appliance's. Copy into a new database (CREATE DATABASE …) before any instance has started on it.`,
      );
    }
    const report: CopyReport = {};
    for (const table of source.tables) {
      for (const batch of table.batches()) await sql`INSERT INTO ${sql(table.name)} ${sql(batch as never, table.columns as never)}`;
      const [{ count }] = (await sql.unsafe(`SELECT count(*)::bigint AS count FROM "${table.name}"`)) as unknown as [{ count: number }];
      if (count !== table.rowCount) throw new Error(`storage copy: ${table.rowCount} rows of ${table.name} read, ${count} written; nothing was committed`);
      report[table.name] = count;
      onTable(table.name, count);
    }
    for (const name of identityTables) {
      const last = source.lastIds[name] ?? 0;
      await sql`SELECT setval(pg_get_serial_sequence(${name}, 'id'), next) FROM (SELECT greatest(${last}::bigint, coalesce(max(id), 0)) AS next FROM ${sql(name)}) AS ids WHERE next > 0`;
    }
    await transaction.commit();
    return report;
  } catch (error) {
    await transaction.rollback();
    throw translateFault(error);
  }
}

async function tablesWithRows(sql: Sql, names: string[]): Promise<string[]> {
  const found = await sql.unsafe(names.map((name) => `SELECT '${name}' AS name WHERE EXISTS (SELECT 1 FROM "${name}")`).join(" UNION ALL "));
  return found.map((row) => row.name as string);
}
