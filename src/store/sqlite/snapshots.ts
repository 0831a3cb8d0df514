// An export's snapshot of one resource's records (DECISIONS 14): a read transaction on a connection of its own. In WAL
// mode it sees what was committed when it began and nothing after, while the worker threads go on writing.
import { Database, type Statement } from "bun:sqlite";
import { getTableColumns, getTableName } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { ResourceDefinition } from "../../resources/definition";
import type { RecordSnapshot, SnapshotOptions } from "../ports";
import { databaseFile } from "./database";
import { answer } from "./faults";
import { recordTables } from "./schema";

const busyTimeoutMs = 5_000;

/**
 * Opens the snapshot on the data directory's database. Its own connection, not the server thread's: a read transaction
 * there would hold every other read of that connection (status polls) in the export's past. Read-only, it takes no
 * write lock; it keeps the WAL from being folded back past its start until it closes.
 */
export function openSqliteSnapshot(dataDir: string, resource: ResourceDefinition, environmentId: number, options: SnapshotOptions = {}): Promise<RecordSnapshot> {
  return answer(() => SqliteSnapshot.open(databaseFile(dataDir), resource, environmentId, options));
}

class SqliteSnapshot implements RecordSnapshot {
  private after = "";
  private done = false;
  private closed = false;

  private constructor(
    private readonly client: Database,
    private readonly slice: Statement,
    private readonly resource: ResourceDefinition,
    private readonly environmentId: number,
    private readonly updatedSince: string | undefined,
  ) {}

  static open(file: string, resource: ResourceDefinition, environmentId: number, { updatedSince }: SnapshotOptions): SqliteSnapshot {
    const table = recordTables[resource.path];
    if (!table) throw new Error(`no table for the import resource ${resource.path}`);
    const columns = Object.entries(getTableColumns(table) as Record<string, SQLiteColumn>).filter(([field]) => field !== "environmentId");
    const name = `"${getTableName(table)}"`;
    const client = new Database(file, { readonly: true, strict: true });
    try {
      client.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
      // By the primary key (environment_id, id): each slice is one seek and `limit` rows on, however far the export is.
      const slice = client.prepare(
        `SELECT ${columns.map(([field, column]) => `"${column.name}" AS "${field}"`).join(", ")} FROM ${name} ` + `WHERE "environment_id" = ?1 AND "id" > ?2 ORDER BY "id" LIMIT ?3`,
      );
      client.exec("BEGIN");
      // A deferred transaction's snapshot is taken by its first read: now, not at the first slice.
      client.query(`SELECT 1 FROM ${name} LIMIT 1`).get();
      return new SqliteSnapshot(client, slice, resource, environmentId, updatedSince);
    } catch (error) {
      client.close();
      throw error;
    }
  }

  next(limit: number): Promise<Array<Record<string, unknown>> | undefined> {
    return answer(() => {
      if (this.done || this.closed) return undefined;
      const rows = this.slice.all(this.environmentId, this.after, limit) as Array<Record<string, unknown>>;
      if (rows.length === 0) {
        this.done = true;
        return undefined;
      }
      this.after = rows[rows.length - 1]!.id as string;
      if (rows.length < limit) this.done = true;
      const since = this.updatedSince;
      const records: Array<Record<string, unknown>> = [];
      // updatedAt is stored as toISOString writes it, so text order is time order.
      for (const row of rows) if (since === undefined || (row.updatedAt as string) >= since) records.push({ ...this.resource.fromRow(row), updatedAt: row.updatedAt, lastJobId: row.lastJobId });
      return records;
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      this.client.exec("ROLLBACK");
      this.slice.finalize();
    } finally {
      this.client.close();
    }
  }
}
