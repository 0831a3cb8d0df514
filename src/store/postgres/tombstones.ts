import type { Tombstone } from "../ports";
import { statement, type Queryable } from "./connection";

/**
 * What deleted records leave (schema.ts, tombstones), on PostgreSQL.
 *
 * The pages of GET /v2/deletions/<resource> go by position, an identity. An identity is taken when a row is inserted,
 * not when its transaction commits, so across transactions it is not commit order in general: a reader could see
 * position 11 committed, keep it as its cursor, and miss position 10 committing a moment later. Here it is, where it
 * counts: tombstones are written only by a run, a run holds its environment's lock from its claim to its commit (see
 * jobs.ts), so the runs of one environment never overlap, and each takes its positions after the one before it
 * committed. Pages are per environment (and resource): within one, position order is commit order.
 */
const columns = `id, deleted_at AS "deletedAt", job_id AS "deletedByJobId", position`;

const anyOf = statement(`SELECT EXISTS (SELECT 1 FROM tombstones WHERE environment_id = $1 AND resource = $2) AS found`);
const endOf = statement(`DELETE FROM tombstones WHERE environment_id = $1 AND resource = $2 AND id = ANY($3::text[])`, { bulk: true });
// WITH ORDINALITY and ORDER BY: the positions follow the order of the ids.
const insert = statement(
  `INSERT INTO tombstones (environment_id, resource, job_id, deleted_at, id)
   SELECT $1, $2, $3, $4, deleted.id FROM unnest($5::text[]) WITH ORDINALITY AS deleted(id, n) ORDER BY n`,
  { bulk: true },
);
const byId = statement(`SELECT ${columns} FROM tombstones WHERE environment_id = $1 AND resource = $2 AND id = $3`);
// The cursor is compared as a bigint: the API takes any 15 digits.
const after = statement(`SELECT ${columns} FROM tombstones WHERE environment_id = $1 AND resource = $2 AND position > $3::bigint ORDER BY position LIMIT $4`);

/**
 * Ends the tombstones of `ids` (imported again), in the run's transaction. Asked by every upsert: one probe says
 * whether the resource has any tombstone in the environment, and only then are the ids looked for, so that ordinary
 * imports pay one probe a job.
 */
export async function endTombstones(run: Queryable, environmentId: number, resource: string, ids: () => string[]): Promise<void> {
  const [row] = await run.query<{ found: boolean }>(anyOf(environmentId, resource));
  if (row!.found) await run.query(endOf(environmentId, resource, ids()));
}

export async function writeTombstones(run: Queryable, environmentId: number, resource: string, jobId: number, ids: readonly string[]): Promise<void> {
  if (ids.length > 0) await run.query(insert(environmentId, resource, jobId, new Date().toISOString(), ids));
}

export async function findTombstone(database: Queryable, environmentId: number, resource: string, id: string): Promise<Tombstone | undefined> {
  const [row] = await database.query<Tombstone>(byId(environmentId, resource, id));
  return row;
}

export async function tombstonePage(database: Queryable, environmentId: number, resource: string, limit: number, from = 0): Promise<Tombstone[]> {
  return database.query<Tombstone>(after(environmentId, resource, from, limit));
}
