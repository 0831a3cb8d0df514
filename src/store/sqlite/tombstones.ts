import type { Tombstone } from "../ports";
import type { Db } from "./database";

const columns = `id, deleted_at AS "deletedAt", job_id AS "deletedByJobId", position`;

/**
 * What deleted records leave (schema.ts, tombstones), on SQLite. One process writes the file, its threads one at a
 * time (WriteLock), so positions taken from the counter inside the deleting run's transaction are the order the runs
 * committed in.
 */
export class SqliteTombstones {
  private readonly anyOf;
  private readonly endOf;
  private readonly takePositions;
  private readonly insert;
  private readonly byId;
  private readonly after;

  constructor(db: Db) {
    const client = db.$client;
    this.anyOf = client.query<{ found: number }, [number, string]>("SELECT EXISTS (SELECT 1 FROM tombstones WHERE environment_id = ?1 AND resource = ?2) AS found");
    this.endOf = client.query<never, [number, string, string]>(
      "DELETE FROM tombstones WHERE environment_id = ?1 AND resource = ?2 AND id IN (SELECT value FROM json_each(?3))",
    );
    // The last position handed out, where SQLite keeps an AUTOINCREMENT's (schema.ts): moved on by a run's count at once.
    this.takePositions = client.query<{ last: number }, [number]>("UPDATE sqlite_sequence SET seq = seq + ?1 WHERE name = 'tombstones' RETURNING seq - ?1 AS last");
    // One statement for all of a run's tombstones: one call a tombstone cost 75 to 110 ms more for 100k (row d1).
    this.insert = client.query<never, [number, string, number, number, string, string]>(
      "INSERT INTO tombstones (environment_id, resource, id, position, job_id, deleted_at) SELECT ?1, ?2, value, ?3 + key + 1, ?4, ?5 FROM json_each(?6)",
    );
    this.byId = client.query<Tombstone, [number, string, string]>(`SELECT ${columns} FROM tombstones WHERE environment_id = ?1 AND resource = ?2 AND id = ?3`);
    this.after = client.query<Tombstone, [number, string, number, number]>(
      `SELECT ${columns} FROM tombstones WHERE environment_id = ?1 AND resource = ?2 AND position > ?3 ORDER BY position LIMIT ?4`,
    );
  }

  /**
   * Ends the tombstones of `ids` (imported again). Asked by every upsert: one seek says whether the resource has any
   * tombstone in the environment, and only then are the ids looked for, so that ordinary imports pay one seek a job.
   */
  endFor(environmentId: number, resource: string, ids: () => string[]): void {
    if (this.anyOf.get(environmentId, resource)!.found) this.endOf.run(environmentId, resource, JSON.stringify(ids()));
  }

  /** Leaves the tombstones of the records `jobId` deleted (none of which has one: an import ended it), positioned in the order of `ids`. */
  leave(environmentId: number, resource: string, jobId: number, ids: readonly string[]): void {
    if (ids.length === 0) return;
    const taken = this.takePositions.get(ids.length);
    if (!taken) throw new Error("the tombstones' position counter is missing from sqlite_sequence (drizzle/0011_tombstones_without_rowid.sql puts it there)");
    this.insert.run(environmentId, resource, taken.last, jobId, new Date().toISOString(), JSON.stringify(ids));
  }

  find(environmentId: number, resource: string, id: string): Tombstone | undefined {
    return this.byId.get(environmentId, resource, id) ?? undefined;
  }

  page(environmentId: number, resource: string, limit: number, after = 0): Tombstone[] {
    return this.after.all(environmentId, resource, after, limit);
  }
}
