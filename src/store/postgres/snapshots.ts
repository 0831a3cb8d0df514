// An export's snapshot of one resource's records (DECISIONS 14): a REPEATABLE READ, READ ONLY transaction on a
// connection of its own, read in slices by id (keyset), so that memory holds one slice whatever the table's size.
import { getTableColumns, getTableName } from "drizzle-orm";
import type { PgColumn } from "drizzle-orm/pg-core";
import pg from "pg";
import type { ResourceDefinition } from "../../resources/definition";
import type { RecordSnapshot, SnapshotOptions } from "../ports";
import { openClient, statement, type Statement } from "./connection";
import { answer } from "./faults";
import { recordTables } from "./schema";

/**
 * Opens the snapshot on a connection of its own to `url`, outside any pool: an export may take minutes, and a pool's
 * few connections are the status polls' and the runs'. `instance`: the serving instance whose connection it is (see
 * liveness.ts). The connection is ended with the snapshot.
 */
export function openPostgresSnapshot(url: string, instance: string | undefined, resource: ResourceDefinition, environmentId: number, options: SnapshotOptions = {}): Promise<RecordSnapshot> {
  return answer(() => PostgresSnapshot.open(openClient(url, { instance }), resource, environmentId, options));
}

const slices = new Map<string, Statement>();

/** The slice's statement: the records of the next ids (by the primary key), and whether more ids follow. */
function sliceOf(resource: ResourceDefinition): Statement {
  let slice = slices.get(resource.path);
  if (slice) return slice;
  const table = recordTables[resource.path];
  if (!table) throw new Error(`no table for the import resource ${resource.path}`);
  const columns = Object.entries(getTableColumns(table) as Record<string, PgColumn>).filter(([field]) => field !== "environmentId");
  const select = columns.map(([field, column]) => `${pg.escapeIdentifier(column.name)} AS ${pg.escapeIdentifier(field)}`).join(", ");
  // The ids of the slice first, `limit` of them, so that each statement's work is bounded with updatedSince too; then
  // their records updated since ($4, null for all). "last" is the slice's last id, the next one's start.
  slice = statement(
    `WITH ids AS (SELECT "id" FROM ${pg.escapeIdentifier(getTableName(table))} WHERE "environment_id" = $1 AND "id" > $2 ORDER BY "id" LIMIT $3) ` +
      `SELECT ${select}, (SELECT max("id") FROM ids) AS "last", (SELECT count(*)::integer FROM ids) AS "read" FROM ${pg.escapeIdentifier(getTableName(table))} ` +
      `WHERE "environment_id" = $1 AND "id" IN (SELECT "id" FROM ids) AND ($4::text IS NULL OR "updated_at" >= $4::text) ORDER BY "id"`,
  );
  slices.set(resource.path, slice);
  return slice;
}

class PostgresSnapshot implements RecordSnapshot {
  private after = "";
  private done = false;
  private closed = false;

  private constructor(
    private readonly client: pg.Client,
    private readonly resource: ResourceDefinition,
    private readonly environmentId: number,
    private readonly updatedSince: string | null,
  ) {}

  static async open(client: pg.Client, resource: ResourceDefinition, environmentId: number, { updatedSince }: SnapshotOptions): Promise<PostgresSnapshot> {
    try {
      await client.connect();
      await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
      // The snapshot is taken by the transaction's first statement: now, not at the first slice.
      await client.query("SELECT 1");
    } catch (error) {
      await client.end().catch(() => {});
      throw error;
    }
    return new PostgresSnapshot(client, resource, environmentId, updatedSince ?? null);
  }

  next(limit: number): Promise<Array<Record<string, unknown>> | undefined> {
    return answer(async () => {
      if (this.done || this.closed) return undefined;
      const { rows } = await this.client.query(sliceOf(this.resource)(this.environmentId, this.after, limit, this.updatedSince));
      // With updatedSince, a slice whose ids were all left out has no row: ask for its last id alone.
      let last = rows[0]?.last as string | null | undefined;
      let read = rows[0]?.read as number | undefined;
      if (rows.length === 0) {
        const { rows: ids } = await this.client.query({
          text: `SELECT max("id") AS "last", count(*)::integer AS "read" FROM (SELECT "id" FROM ${pg.escapeIdentifier(getTableName(recordTables[this.resource.path]!))} WHERE "environment_id" = $1 AND "id" > $2 ORDER BY "id" LIMIT $3) ids`,
          values: [this.environmentId, this.after, limit],
        });
        last = ids[0]?.last as string | null;
        read = ids[0]?.read as number;
      }
      if (!last) {
        this.done = true;
        return undefined;
      }
      this.after = last;
      if (read! < limit) this.done = true;
      return rows.map((row) => ({ ...this.resource.fromRow(row), updatedAt: row.updatedAt, lastJobId: row.lastJobId }));
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.client.query("ROLLBACK").catch(() => {});
    await this.client.end().catch(() => {});
  }
}
