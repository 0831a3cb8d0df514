import { and, asc, eq, getTableColumns, getTableName, gt } from "drizzle-orm";
import type { PgColumn, PgTable } from "drizzle-orm/pg-core";
import pg from "pg";
import type { ResourceDefinition } from "../../resources/definition";
import type { RecordReads, Referrers, RunRecords, Tombstone, UpsertCounts } from "../ports";
import { statement, type Db, type Queryable, type Statement, type Transaction } from "./connection";
import { answer } from "./faults";
import { recordTables } from "./schema";
import { PostgresSyncs } from "./syncs";
import { endTombstones, findTombstone, tombstonePage, writeTombstones } from "./tombstones";

const sharedColumns = new Set(["environmentId", "id", "updatedAt", "lastJobId"]);

/**
 * From this many records on, a job's records go by COPY into a temporary table, then one merge; fewer go as JSON inside
 * the merge (one round trip, not three). bench/pg-upsert-paths.ts: COPY costs 1.3 ms more for one record, breaks even
 * near 2,000, and takes 0.8 times as long at 20,000.
 */
export const copyFromRecords = 2_000;
const copyChunkBytes = 256 * 1024;

// COPY's binary format (PostgreSQL's COPY page, "Binary Format"): the signature, no flags, no header extension; then
// each row as its number of fields and each field as its length in bytes (-1: NULL) and its value, in network order:
// text as UTF-8, double precision as an IEEE 754 double; -1 in place of a row ends it. Against the text format, the
// server took half the time to take in 100k assets (no line split, no escapes, no number parsed), the run's COPY half
// as long, though building the rows in JS takes a little longer (bench/history/performance-log.md, "Row pg 1a's COPY").
const copyHeader = Buffer.from("PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0", "latin1");
const copyTrailer = -1;
const copiedTypes = new Set(["text", "double precision"]);

/**
 * One resource's table. The upsert, the hot path of every job, is a statement that inserts, updates where something
 * changed, and counts what it did; its SQL is derived from the Drizzle table, the single source of the columns.
 */
class ResourceTable {
  private readonly table: PgTable;
  private readonly columns: Record<string, PgColumn>;
  // The record's columns in the order the upsert sends them: id, then the resource's own.
  private readonly sentFields: string[];
  private readonly upsertByJson: Statement;
  private readonly createStaging: string;
  private readonly copyStaging: string;
  // Which of sentFields are double precision; the others are text (the constructor checks).
  private readonly sentDoubles: boolean[];
  private readonly mergeStaging: Statement;
  private readonly existingIds: Statement;
  private readonly removeIds: Statement;
  private readonly referrersBy: (field: string) => Statement;

  constructor(
    private readonly db: Db,
    readonly resource: ResourceDefinition,
    private readonly copyFrom: number,
  ) {
    const table = recordTables[resource.path];
    if (!table) throw new Error(`no table for the import resource ${resource.path}`);
    this.table = table as PgTable;
    this.columns = getTableColumns(this.table) as Record<string, PgColumn>;
    const valueFields = Object.keys(this.columns).filter((field) => !sharedColumns.has(field));
    this.sentFields = ["id", ...valueFields];
    const name = (field: string) => pg.escapeIdentifier(this.columns[field]!.name);
    const tableName = pg.escapeIdentifier(getTableName(this.table));

    // A record equal to the stored one is not written (its updatedAt and lastJobId stay): the update's WHERE is false,
    // and then no row comes back. Of those that do, a new row has no xmax yet (an updated one has this transaction's).
    // Counted in the statement: one row comes back, not one per record.
    const merge = (source: string, values: string[]) => {
      const updates = [...valueFields, "updatedAt", "lastJobId"].map((field) => `${name(field)} = excluded.${name(field)}`);
      const stored = valueFields.map(name);
      return (
        `WITH written AS (` +
        `INSERT INTO ${tableName} AS stored (${["environmentId", "updatedAt", "lastJobId", ...this.sentFields].map(name).join(", ")}) ` +
        `SELECT $1::integer, $2::text, $3::bigint, ${values.join(", ")} FROM ${source} ` +
        `ON CONFLICT (${name("environmentId")}, ${name("id")}) DO UPDATE SET ${updates.join(", ")} ` +
        `WHERE (${stored.map((column) => `stored.${column}`).join(", ")}) IS DISTINCT FROM (${stored.map((column) => `excluded.${column}`).join(", ")}) ` +
        `RETURNING (stored.xmax = 0) AS created) ` +
        `SELECT count(*) FILTER (WHERE created)::integer AS "created", count(*)::integer AS "written" FROM written`
      );
    };
    const sqlType = (field: string) => this.columns[field]!.getSQLType();

    // JSON: each row an array of its column values, taken apart by jsonb_array_elements. ->> gives a JSON null as NULL
    // and a number as jsonb keeps it, exactly as sent (numeric), so the cast to double precision gives back the very
    // double that JSON.stringify wrote.
    this.upsertByJson = statement(
      merge(
        "jsonb_array_elements($4::text::jsonb) AS r",
        this.sentFields.map((field, index) => `(r->>${index})::${sqlType(field)}`),
      ),
      { bulk: true },
    );

    // COPY: into a temporary table of the sent columns, made once per connection and emptied at every commit (made
    // and dropped with each run, it cost about 5 ms more a run). Emptied before each use too: a run may have several
    // big jobs, and a rolled back one leaves its rows.
    const staging = pg.escapeIdentifier(`importd_staging_${getTableName(this.table)}`);
    this.createStaging =
      `CREATE TEMP TABLE IF NOT EXISTS ${staging} (${this.sentFields.map((field) => `${name(field)} ${sqlType(field)}`).join(", ")}) ON COMMIT DELETE ROWS; ` +
      `DELETE FROM ${staging}`;
    this.copyStaging = `COPY ${staging} (${this.sentFields.map(name).join(", ")}) FROM STDIN WITH (FORMAT binary)`;
    const uncopied = this.sentFields.find((field) => !copiedTypes.has(sqlType(field)));
    if (uncopied) throw new Error(`${resource.path}.${uncopied}: COPY writes no ${sqlType(uncopied)} (only ${[...copiedTypes].join(", ")})`);
    this.sentDoubles = this.sentFields.map((field) => sqlType(field) === "double precision");
    this.mergeStaging = statement(merge(staging, this.sentFields.map(name)), { bulk: true });

    this.existingIds = statement(`SELECT "id" FROM ${tableName} WHERE "environment_id" = $1 AND "id" = ANY($2::text[])`);
    this.removeIds = statement(`DELETE FROM ${tableName} WHERE "environment_id" = $1 AND "id" = ANY($2::text[]) RETURNING "id"`, { bulk: true });
    const referrers = new Map<string, Statement>();
    this.referrersBy = (field) => {
      let grouped = referrers.get(field);
      if (!grouped) {
        const column = name(field);
        grouped = statement(
          `SELECT ${column} AS "named", count(*)::integer AS "count", min("id") AS "example" FROM ${tableName} ` +
            `WHERE "environment_id" = $1 AND ${column} = ANY($2::text[]) GROUP BY ${column}`,
          { bulk: true },
        );
        referrers.set(field, grouped);
      }
      return grouped;
    };
  }

  // The record's values in the order of sentFields (an absent one: null in JSON and in COPY). Its text is well-formed
  // (validation made it so): JSON.stringify would write a lone surrogate as an escape jsonb refuses.
  private valuesOf(record: { id: string }): unknown[] {
    const row = this.resource.toRow(record as never) as Record<string, unknown>;
    const values: unknown[] = [record.id];
    for (let column = 1; column < this.sentFields.length; column++) values.push(row[this.sentFields[column]!]);
    return values;
  }

  /** Upserts the records on the run's connection, inside its transaction: by COPY from copyFrom records on. */
  async upsertAll(run: Transaction, environmentId: number, jobId: number, records: ReadonlyArray<{ id: string }>): Promise<UpsertCounts> {
    const updatedAt = new Date().toISOString();
    // An id imported again is no longer deleted.
    await endTombstones(run, environmentId, this.resource.path, () => records.map((record) => record.id));
    let merge: pg.QueryConfig;
    if (records.length >= this.copyFrom) {
      await run.query(this.createStaging);
      await run.copyIn(this.copyStaging, this.copyRows(records));
      merge = this.mergeStaging(environmentId, updatedAt, jobId);
    } else {
      // Sent as text: a parameter typed jsonb would go through the client's jsonb serializer.
      merge = this.upsertByJson(environmentId, updatedAt, jobId, JSON.stringify(records.map((record) => this.valuesOf(record))));
    }
    const [{ created, written }] = (await run.query<{ created: number; written: number }>(merge)) as [{ created: number; written: number }];
    return { created, updated: written - created, unchanged: records.length - written };
  }

  /** The records in COPY's binary format, a chunk at a time. */
  private *copyRows(records: ReadonlyArray<{ id: string }>): Generator<Uint8Array> {
    const fields = this.sentFields;
    const doubles = this.sentDoubles;
    let chunk = Buffer.allocUnsafe(copyChunkBytes);
    let at = copyHeader.copy(chunk);
    for (const record of records) {
      // A lone surrogate goes as U+FFFD, as by the JSON way (the store's contract tests check both ways). Read in place
      // rather than through valuesOf: its array a row made this COPY some 15% slower (bench/pg-copy-phases.ts).
      const row = this.resource.toRow(record as never) as Record<string, unknown>;
      // The most the row can take (UTF-8 is at most 3 bytes per UTF-16 unit), with the trailer's 2: a full chunk goes,
      // and a new one takes its place (bigger, for a row longer than a chunk).
      let most = 4 + fields.length * 12;
      for (let column = 0; column < fields.length; column++) {
        const value = column === 0 ? record.id : row[fields[column]!];
        if (typeof value === "string") most += value.length * 3;
      }
      if (at + most > chunk.length) {
        yield chunk.subarray(0, at);
        chunk = Buffer.allocUnsafe(Math.max(copyChunkBytes, most));
        at = 0;
      }
      at = chunk.writeInt16BE(fields.length, at);
      for (let column = 0; column < fields.length; column++) {
        const value = column === 0 ? record.id : row[fields[column]!];
        if (value === null || value === undefined) {
          at = chunk.writeInt32BE(-1, at);
        } else if (doubles[column]) {
          at = chunk.writeInt32BE(8, at);
          at = chunk.writeDoubleBE(value as number, at);
        } else {
          const bytes = chunk.write(value as string, at + 4, "utf8");
          chunk.writeInt32BE(bytes, at);
          at += 4 + bytes;
        }
      }
    }
    // The row before made room for it.
    at = chunk.writeInt16BE(copyTrailer, at);
    yield chunk.subarray(0, at);
  }

  /** Which of `ids` exist in the environment, as the run's transaction sees it: one index probe per id. */
  async existing(run: Transaction, environmentId: number, ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await run.query<{ id: string }>(this.existingIds(environmentId, ids));
    return new Set(rows.map((row) => row.id));
  }

  /** See RunRecords.referrers: the records of this table whose `field` names one of `ids`, grouped by it. */
  async referrers(run: Transaction, environmentId: number, field: string, ids: readonly string[]): Promise<Map<string, Referrers>> {
    if (ids.length === 0) return new Map();
    const rows = await run.query<{ named: string; count: number; example: string }>(this.referrersBy(field)(environmentId, ids));
    return new Map(rows.map(({ named, count, example }) => [named, { count, example }]));
  }

  /** Deletes the records of `ids` that exist and leaves their tombstones, in the order of `ids` (a repeated id once). */
  async remove(run: Transaction, environmentId: number, jobId: number, ids: readonly string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const removed = new Set((await run.query<{ id: string }>(this.removeIds(environmentId, ids))).map((row) => row.id));
    const deleted = [...new Set(ids)].filter((id) => removed.has(id));
    await writeTombstones(run, environmentId, this.resource.path, jobId, deleted);
    return deleted;
  }

  async get(environmentId: number, id: string): Promise<Record<string, unknown> | undefined> {
    const { environmentId: environment, id: key } = this.columns as { environmentId: PgColumn; id: PgColumn };
    const [row] = await this.db.select().from(this.table).where(and(eq(environment, environmentId), eq(key, id)));
    return row && this.toWire(row);
  }

  async page(environmentId: number, limit: number, after?: string): Promise<Array<Record<string, unknown>>> {
    const { environmentId: environment, id: key } = this.columns as { environmentId: PgColumn; id: PgColumn };
    const where = and(eq(environment, environmentId), after !== undefined ? gt(key, after) : undefined);
    return (await this.db.select().from(this.table).where(where).orderBy(asc(key)).limit(limit)).map((row) => this.toWire(row));
  }

  private toWire(row: Record<string, unknown>) {
    return { ...this.resource.fromRow(row), updatedAt: row.updatedAt, lastJobId: row.lastJobId };
  }
}

/** Every resource's table, each with its SQL built once. */
export class PostgresRecords implements RecordReads {
  private readonly byPath = new Map<string, ResourceTable>();
  private readonly syncs: PostgresSyncs;

  /**
   * `any`: a statement outside any transaction (the tombstones' reads). `copyFrom`: the batch size from which records
   * go by COPY (another only to measure both ways).
   */
  constructor(
    private readonly db: Db,
    private readonly any: Queryable,
    private readonly copyFrom = copyFromRecords,
  ) {
    this.syncs = new PostgresSyncs(any);
  }

  private of(resource: ResourceDefinition): ResourceTable {
    let table = this.byPath.get(resource.path);
    if (!table) this.byPath.set(resource.path, (table = new ResourceTable(this.db, resource, this.copyFrom)));
    return table;
  }

  /** The records of one environment as a run's transaction, on its own connection, reads and writes them. */
  forRun(run: Transaction, environmentId: number): RunRecords {
    return {
      existing: (resource, ids) => answer(() => this.of(resource).existing(run, environmentId, ids)),
      upsert: (resource, jobId, records) => answer(() => this.of(resource).upsertAll(run, environmentId, jobId, records)),
      referrers: (referring, field, ids) => answer(() => this.of(referring).referrers(run, environmentId, field, ids)),
      remove: (resource, jobId, ids) => answer(() => this.of(resource).remove(run, environmentId, jobId, ids)),
      undone: async (fn) => {
        await answer(() => run.query("SAVEPOINT dry_run"));
        try {
          return await fn();
        } finally {
          await answer(() => run.query("ROLLBACK TO SAVEPOINT dry_run"));
        }
      },
      syncs: this.syncs.forRun(run, environmentId),
    };
  }

  get(resource: ResourceDefinition, environmentId: number, id: string): Promise<Record<string, unknown> | undefined> {
    return answer(() => this.of(resource).get(environmentId, id));
  }

  page(resource: ResourceDefinition, environmentId: number, limit: number, after?: string): Promise<Array<Record<string, unknown>>> {
    return answer(() => this.of(resource).page(environmentId, limit, after));
  }

  tombstone(resource: ResourceDefinition, environmentId: number, id: string): Promise<Tombstone | undefined> {
    return answer(() => findTombstone(this.any, environmentId, resource.path, id));
  }

  tombstones(resource: ResourceDefinition, environmentId: number, limit: number, after?: number): Promise<Tombstone[]> {
    return answer(() => tombstonePage(this.any, environmentId, resource.path, limit, after));
  }
}
