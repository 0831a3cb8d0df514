import type { Statement } from "bun:sqlite";
import { and, asc, eq, getTableColumns, getTableName, gt } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import type { ResourceDefinition } from "../../resources/definition";
import type { RecordReads, Referrers, RunRecords, Tombstone, UpsertCounts } from "../ports";
import type { Db } from "./database";
import { answer } from "./faults";
import { recordTables } from "./schema";
import { SqliteSyncs } from "./syncs";
import { SqliteTombstones } from "./tombstones";

const sharedColumns = new Set(["environmentId", "id", "updatedAt", "lastJobId"]);

/**
 * Records per upsert statement: one statement of many rows costs SQLite and bun:sqlite one call, one bind and
 * one reset where single rows cost one each (100k assets: about 15% faster at 32 rows, no faster at 128;
 * docs/performance.md). 32 rows of the widest table bind 576 values, far under SQLite's limit.
 */
const rowsPerUpsert = 32;

type RecordTable = {
  environmentId: SQLiteColumn;
  id: SQLiteColumn;
};

function tableOf(resource: ResourceDefinition): SQLiteTable {
  const table = recordTables[resource.path];
  if (!table) throw new Error(`no table for the import resource ${resource.path}`);
  return table as SQLiteTable;
}

/** Which of the ids (a JSON array, ?2) exist in the environment (?1): the table's primary key, sought once per id. */
export const existingIdsSql = (table: string) =>
  `SELECT "id" FROM "${table}" WHERE "environment_id" = ?1 AND "id" IN (SELECT value FROM json_each(?2))`;

/**
 * Reads and writes of one resource's table. The upsert is the hot path of every job: one bun:sqlite
 * statement, prepared once and reused for every row inside the run's transaction (Drizzle's batched
 * values() upsert measured several times slower). Its SQL is derived from the Drizzle table, so the
 * table definition stays the single source of the columns.
 */
class ResourceTable {
  private readonly table: SQLiteTable;
  private readonly columns: Record<string, SQLiteColumn>;
  private readonly valueFields: string[];
  private upsertStatements?: { one: Statement; many: Statement };
  private existingStatement?: Statement;
  private removeStatement?: Statement;
  private readonly referrersStatements = new Map<string, Statement>();
  private lastRowid?: Statement;
  private readonly keyed: RecordTable;

  constructor(
    private readonly db: Db,
    readonly resource: ResourceDefinition,
    private readonly tombstones: SqliteTombstones,
  ) {
    this.table = tableOf(resource);
    this.columns = getTableColumns(this.table) as Record<string, SQLiteColumn>;
    this.valueFields = Object.keys(this.columns).filter((field) => !sharedColumns.has(field));
    this.keyed = this.columns as unknown as RecordTable;
  }

  private upsertSql(rows: number): string {
    const q = (name: string) => `"${name}"`;
    const fields = ["environmentId", "id", ...this.valueFields, "updatedAt", "lastJobId"];
    const names = fields.map((field) => q(this.columns[field]!.name));
    const updates = fields
      .filter((field) => field !== "environmentId" && field !== "id")
      .map((field) => `${q(this.columns[field]!.name)} = excluded.${q(this.columns[field]!.name)}`);
    const table = q(getTableName(this.table));
    const values = this.valueFields.map((field) => q(this.columns[field]!.name));
    // A record equal to the stored one is not written (its updatedAt and lastJobId stay): the update's WHERE is
    // false, and the statement changes nothing.
    return (
      `INSERT INTO ${table} (${names.join(", ")}) ` +
      `VALUES ${Array.from({ length: rows }, () => `(${fields.map(() => "?").join(", ")})`).join(", ")} ` +
      `ON CONFLICT (${q(this.columns.environmentId!.name)}, ${q(this.columns.id!.name)}) DO UPDATE SET ${updates.join(", ")} ` +
      `WHERE (${values.map((name) => `${table}.${name}`).join(", ")}) IS NOT (${values.map((name) => `excluded.${name}`).join(", ")})`
    );
  }

  /**
   * Upserts the records; the caller holds the transaction. Counted without a row back from each statement (RETURNING
   * cost a quarter of the upsert, docs/performance.md): a statement that changed a row inserted or updated it, and the
   * inserted ones are the table's new rowids. SQLite gives a new row the largest rowid plus one, no record is deleted
   * while this runs (a delete job's statements come before or after it), and nobody else writes inside this transaction:
   * the largest rowid grew by exactly the records created.
   * The records' ids are distinct (a batch that repeats one fails before it is applied), so no statement's rows
   * conflict with each other.
   */
  upsertAll(environmentId: number, jobId: number, records: ReadonlyArray<{ id: string }>): UpsertCounts {
    this.upsertStatements ??= { one: this.db.$client.prepare(this.upsertSql(1)), many: this.db.$client.prepare(this.upsertSql(rowsPerUpsert)) };
    this.lastRowid ??= this.db.$client.prepare(`SELECT coalesce(max(rowid), 0) AS "rowid" FROM "${getTableName(this.table)}"`);
    const { one, many } = this.upsertStatements;
    // An id imported again is no longer deleted.
    this.tombstones.endFor(environmentId, this.resource.path, () => records.map((record) => record.id));
    const before = (this.lastRowid.get() as { rowid: number }).rowid;
    const updatedAt = new Date().toISOString();
    const fields = this.valueFields;
    const width = fields.length + 4;
    const bind = (params: unknown[], start: number, record: { id: string }) => {
      const row = this.resource.toRow(record as never);
      params[start] = environmentId;
      params[start + 1] = record.id;
      for (let i = 0; i < fields.length; i++) params[start + i + 2] = row[fields[i]!] ?? null;
      params[start + width - 2] = updatedAt;
      params[start + width - 1] = jobId;
    };
    let changed = 0;
    let index = 0;
    const rows: unknown[] = new Array(width * rowsPerUpsert);
    for (; index + rowsPerUpsert <= records.length; index += rowsPerUpsert) {
      for (let row = 0; row < rowsPerUpsert; row++) bind(rows, row * width, records[index + row]!);
      changed += many.run(...(rows as never[])).changes;
    }
    const row: unknown[] = new Array(width);
    for (; index < records.length; index++) {
      bind(row, 0, records[index]!);
      changed += one.run(...(row as never[])).changes;
    }
    const created = (this.lastRowid.get() as { rowid: number }).rowid - before;
    return { created, updated: changed - created, unchanged: records.length - changed };
  }

  /** Which of `ids` exist in the environment, for job-time reference checks: one seek per id, however big the table. */
  existing(environmentId: number, ids: readonly string[]): Set<string> {
    if (ids.length === 0) return new Set();
    this.existingStatement ??= this.db.$client.prepare(existingIdsSql(getTableName(this.table)));
    const rows = this.existingStatement.all(environmentId, JSON.stringify(ids)) as Array<{ id: string }>;
    return new Set(rows.map((row) => row.id));
  }

  /** See RunRecords.referrers: the records of this table whose `field` names one of `ids`, grouped by it. */
  referrers(environmentId: number, field: string, ids: readonly string[]): Map<string, Referrers> {
    if (ids.length === 0) return new Map();
    let statement = this.referrersStatements.get(field);
    if (!statement) {
      const column = `"${this.columns[field]!.name}"`;
      statement = this.db.$client.prepare(
        `SELECT ${column} AS "named", count(*) AS "count", min("id") AS "example" FROM "${getTableName(this.table)}" ` +
          `WHERE "environment_id" = ?1 AND ${column} IN (SELECT value FROM json_each(?2)) GROUP BY ${column}`,
      );
      this.referrersStatements.set(field, statement);
    }
    const rows = statement.all(environmentId, JSON.stringify(ids)) as Array<{ named: string; count: number; example: string }>;
    return new Map(rows.map(({ named, count, example }) => [named, { count, example }]));
  }

  /**
   * Deletes the records of `ids` that exist and leaves their tombstones, in the order of `ids`; a repeated id is not
   * found the second time. One prepared statement an id: a set-based `IN (json_each)` made SQLite sort the list and
   * gather the rows before deleting, twice as slow for 100k ids (docs/performance.md, row d1). The tombstones go in
   * one statement after.
   */
  remove(environmentId: number, jobId: number, ids: readonly string[]): string[] {
    this.removeStatement ??= this.db.$client.prepare(`DELETE FROM "${getTableName(this.table)}" WHERE "environment_id" = ?1 AND "id" = ?2`);
    const deleted: string[] = [];
    for (const id of ids) if (this.removeStatement.run(environmentId, id).changes > 0) deleted.push(id);
    this.tombstones.leave(environmentId, this.resource.path, jobId, deleted);
    return deleted;
  }

  get(environmentId: number, id: string): Record<string, unknown> | undefined {
    const row = this.db
      .select()
      .from(this.table)
      .where(and(eq(this.keyed.environmentId, environmentId), eq(this.keyed.id, id)))
      .get() as Record<string, unknown> | undefined;
    return row && this.toWire(row);
  }

  page(environmentId: number, limit: number, after?: string): Array<Record<string, unknown>> {
    const rows = this.db
      .select()
      .from(this.table)
      .where(and(eq(this.keyed.environmentId, environmentId), after !== undefined ? gt(this.keyed.id, after) : undefined))
      .orderBy(asc(this.keyed.id))
      .limit(limit)
      .all() as Array<Record<string, unknown>>;
    return rows.map((row) => this.toWire(row));
  }

  private toWire(row: Record<string, unknown>) {
    return { ...this.resource.fromRow(row), updatedAt: row.updatedAt, lastJobId: row.lastJobId };
  }
}

/** Every resource's table on one connection, each with its statements prepared once. */
export class RecordTables implements RecordReads {
  private readonly byPath = new Map<string, ResourceTable>();
  private readonly tombstoneTable: SqliteTombstones;
  private readonly syncTable: SqliteSyncs;

  constructor(private readonly db: Db) {
    this.tombstoneTable = new SqliteTombstones(db);
    this.syncTable = new SqliteSyncs(db);
  }

  of(resource: ResourceDefinition): ResourceTable {
    let table = this.byPath.get(resource.path);
    if (!table) this.byPath.set(resource.path, (table = new ResourceTable(this.db, resource, this.tombstoneTable)));
    return table;
  }

  /** The records of one environment as a run's transaction reads and writes them. */
  forRun(environmentId: number): RunRecords {
    return {
      existing: (resource, ids) => answer(() => this.of(resource).existing(environmentId, ids)),
      upsert: (resource, jobId, records) => answer(() => this.of(resource).upsertAll(environmentId, jobId, records)),
      referrers: (referring, field, ids) => answer(() => this.of(referring).referrers(environmentId, field, ids)),
      remove: (resource, jobId, ids) => answer(() => this.of(resource).remove(environmentId, jobId, ids)),
      undone: async (fn) => {
        this.db.$client.run("SAVEPOINT dry_run");
        try {
          return await fn();
        } finally {
          this.db.$client.run("ROLLBACK TO dry_run");
          this.db.$client.run("RELEASE dry_run");
        }
      },
      syncs: this.syncTable.forRun(environmentId),
    };
  }

  get(resource: ResourceDefinition, environmentId: number, id: string): Promise<Record<string, unknown> | undefined> {
    return answer(() => this.of(resource).get(environmentId, id));
  }

  page(resource: ResourceDefinition, environmentId: number, limit: number, after?: string): Promise<Array<Record<string, unknown>>> {
    return answer(() => this.of(resource).page(environmentId, limit, after));
  }

  tombstone(resource: ResourceDefinition, environmentId: number, id: string): Promise<Tombstone | undefined> {
    return answer(() => this.tombstoneTable.find(environmentId, resource.path, id));
  }

  tombstones(resource: ResourceDefinition, environmentId: number, limit: number, after?: number): Promise<Tombstone[]> {
    return answer(() => this.tombstoneTable.page(environmentId, resource.path, limit, after));
  }
}
