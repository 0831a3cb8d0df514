import type { Tombstone } from "../ports";
import type { Db } from "./database";

const columns = `id, deleted_at AS "deletedAt", job_id AS "deletedByJobId", position`;

/**
 * What deleted records leave (schema.ts, tombstones), on SQLite. One process writes the file, its threads one at a
 * time (WriteLock), so the AUTOINCREMENT position is the order the deleting runs committed in.
 */
export class SqliteTombstones {
  private readonly anyOf;
  private readonly endOf;
  private readonly insert;
  private readonly byId;
  private readonly after;

  constructor(db: Db) {
    const client = db.$client;
    this.anyOf = client.query<{ found: number }, [number, string]>("SELECT EXISTS (SELECT 1 FROM tombstones WHERE environment_id = ?1 AND resource = ?2) AS found");
    this.endOf = client.query<never, [number, string, string]>(
      "DELETE FROM tombstones WHERE environment_id = ?1 AND resource = ?2 AND id IN (SELECT value FROM json_each(?3))",
    );
    this.insert = client.query<never, [number, string, string, number, string]>("INSERT INTO tombstones (environment_id, resource, id, job_id, deleted_at) VALUES (?1, ?2, ?3, ?4, ?5)");
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

  /** Leaves the tombstone of each record `jobId` deletes, as it deletes it: their positions follow the calls. */
  writer(environmentId: number, resource: string, jobId: number): (id: string) => void {
    const deletedAt = new Date().toISOString();
    return (id) => void this.insert.run(environmentId, resource, id, jobId, deletedAt);
  }

  find(environmentId: number, resource: string, id: string): Tombstone | undefined {
    return this.byId.get(environmentId, resource, id) ?? undefined;
  }

  page(environmentId: number, resource: string, limit: number, after = 0): Tombstone[] {
    return this.after.all(environmentId, resource, after, limit);
  }
}
