import { and, asc, eq, getTableColumns, getTableName, gt } from "drizzle-orm";
import type { PgColumn, PgTable } from "drizzle-orm/pg-core";
import type { ResourceDefinition } from "../../resources/definition";
import type { RecordReads, RunRecords, UpsertCounts } from "../ports";
import type { Db, Sql } from "./connection";
import { answer } from "./faults";
import { recordTables } from "./schema";

const sharedColumns = new Set(["environmentId", "id", "updatedAt", "lastJobId"]);
// Rows per statement, each chunk one JSON text: about 1.7 MB of assets, parsed by the server in one go.
const upsertChunk = 5_000;

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

/**
 * One resource's table. The upsert is the hot path of every job: one statement per chunk of records, the chunk
 * sent as one JSON array of rows (each an array of its column values, in order) and taken apart by
 * jsonb_array_elements. Measured against one array parameter per column turned back into rows by unnest: 100k
 * assets in 1.3-1.6 s against 1.7 s, and runs of one-record jobs with about 30% less of the server's CPU
 * (docs/performance.md). Its SQL is derived from the Drizzle table, so the table definition stays the single
 * source of the columns.
 */
class ResourceTable {
  private readonly table: PgTable;
  private readonly columns: Record<string, PgColumn>;
  private readonly valueFields: string[];
  private readonly upsertSql: string;

  constructor(
    private readonly db: Db,
    readonly resource: ResourceDefinition,
  ) {
    const table = recordTables[resource.path];
    if (!table) throw new Error(`no table for the import resource ${resource.path}`);
    this.table = table as PgTable;
    this.columns = getTableColumns(this.table) as Record<string, PgColumn>;
    this.valueFields = Object.keys(this.columns).filter((field) => !sharedColumns.has(field));
    const name = (field: string) => quote(this.columns[field]!.name);
    // ->> gives a JSON null as NULL and a number as jsonb keeps it, exactly as sent (numeric), so the cast to double
    // precision gives back the very double that JSON.stringify wrote.
    const values = ["id", ...this.valueFields].map((field, index) => `(r->>${index})::${this.columns[field]!.getSQLType()}`);
    const updates = [...this.valueFields, "updatedAt", "lastJobId"].map((field) => `${name(field)} = excluded.${name(field)}`);
    // A record equal to the stored one is not written (its updatedAt and lastJobId stay): the update's WHERE is
    // false, and then no row comes back. Of those that do, a new row has no xmax yet (an updated one has this
    // transaction's). Counted in the statement: one row comes back, not one per record, so that a run's
    // connection never has a large answer to read while it holds its environment's lock.
    const stored = this.valueFields.map(name);
    this.upsertSql =
      `WITH written AS (` +
      `INSERT INTO ${quote(getTableName(this.table))} AS stored (${["environmentId", "updatedAt", "lastJobId", "id", ...this.valueFields].map(name).join(", ")}) ` +
      `SELECT $1::integer, $2::text, $3::bigint, ${values.join(", ")} FROM jsonb_array_elements($4::text::jsonb) AS r ` +
      `ON CONFLICT (${name("environmentId")}, ${name("id")}) DO UPDATE SET ${updates.join(", ")} ` +
      `WHERE (${stored.map((column) => `stored.${column}`).join(", ")}) IS DISTINCT FROM (${stored.map((column) => `excluded.${column}`).join(", ")}) ` +
      `RETURNING (stored.xmax = 0) AS created) ` +
      `SELECT count(*) FILTER (WHERE created)::integer AS "created", count(*)::integer AS "written" FROM written`;
  }

  /** Upserts the records on the run's connection, inside its transaction. */
  async upsertAll(sql: Sql, environmentId: number, jobId: number, records: ReadonlyArray<{ id: string }>): Promise<UpsertCounts> {
    const updatedAt = new Date().toISOString();
    const counts = { created: 0, updated: 0, unchanged: 0 };
    for (let start = 0; start < records.length; start += upsertChunk) {
      const rows = records.slice(start, start + upsertChunk).map((record) => {
        const values = this.resource.toRow(record as never) as Record<string, unknown>;
        const row = new Array(this.valueFields.length + 1);
        // Well-formed text (validation made it so): JSON.stringify would write a lone surrogate as an escape jsonb refuses.
        row[0] = record.id;
        for (let column = 0; column < this.valueFields.length; column++) row[column + 1] = values[this.valueFields[column]!] ?? null;
        return row;
      });
      // Sent as text: a parameter typed jsonb would go through the client's jsonb serializer, which postgres.js
      // makes JSON.stringify (it would arrive as one JSON string) and Drizzle replaces; text is sent as it is.
      const [{ created, written }] = (await sql.unsafe(this.upsertSql, [environmentId, updatedAt, jobId, JSON.stringify(rows)] as never[])) as unknown as [{ created: number; written: number }];
      counts.created += created;
      counts.updated += written - created;
      counts.unchanged += rows.length - written;
    }
    return counts;
  }

  /** Which of `ids` exist in the environment, as the run's transaction sees it: one index probe per id. */
  async existing(sql: Sql, environmentId: number, ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await sql.unsafe(`SELECT "id" FROM ${quote(getTableName(this.table))} WHERE "environment_id" = $1 AND "id" = ANY($2::text[])`, [environmentId, ids as string[]]);
    return new Set(rows.map((row) => row.id as string));
  }

  async get(environmentId: number, id: string): Promise<Record<string, unknown> | undefined> {
    const keyed = this.columns as { environmentId: PgColumn; id: PgColumn };
    const [row] = await this.db.select().from(this.table).where(and(eq(keyed.environmentId, environmentId), eq(keyed.id, id)));
    return row && this.toWire(row);
  }

  async page(environmentId: number, limit: number, after?: string): Promise<Array<Record<string, unknown>>> {
    const keyed = this.columns as { environmentId: PgColumn; id: PgColumn };
    const rows = await this.db
      .select()
      .from(this.table)
      .where(and(eq(keyed.environmentId, environmentId), after !== undefined ? gt(keyed.id, after) : undefined))
      .orderBy(asc(keyed.id))
      .limit(limit);
    return rows.map((row) => this.toWire(row));
  }

  private toWire(row: Record<string, unknown>) {
    return { ...this.resource.fromRow(row), updatedAt: row.updatedAt, lastJobId: row.lastJobId };
  }
}

/** Every resource's table, each with its SQL built once. */
export class PostgresRecords implements RecordReads {
  private readonly byPath = new Map<string, ResourceTable>();

  constructor(private readonly db: Db) {}

  private of(resource: ResourceDefinition): ResourceTable {
    let table = this.byPath.get(resource.path);
    if (!table) this.byPath.set(resource.path, (table = new ResourceTable(this.db, resource)));
    return table;
  }

  /** The records of one environment as a run's transaction, on its own connection, reads and writes them. */
  forRun(sql: Sql, environmentId: number): RunRecords {
    return {
      existing: (resource, ids) => answer(() => this.of(resource).existing(sql, environmentId, ids)),
      upsert: (resource, jobId, records) => answer(() => this.of(resource).upsertAll(sql, environmentId, jobId, records)),
      undone: async (fn) => {
        await answer(() => sql`SAVEPOINT dry_run`);
        try {
          return await fn();
        } finally {
          await answer(() => sql`ROLLBACK TO SAVEPOINT dry_run`);
        }
      },
    };
  }

  get(resource: ResourceDefinition, environmentId: number, id: string): Promise<Record<string, unknown> | undefined> {
    return answer(() => this.of(resource).get(environmentId, id));
  }

  page(resource: ResourceDefinition, environmentId: number, limit: number, after?: string): Promise<Array<Record<string, unknown>>> {
    return answer(() => this.of(resource).page(environmentId, limit, after));
  }
}
