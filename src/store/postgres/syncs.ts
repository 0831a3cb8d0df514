import pg from "pg";
import { getTableName } from "drizzle-orm";
import type { ResourceDefinition } from "../../resources/definition";
import { toJob, type JobRow } from "../job-row";
import type { RunSyncs, Sync, SyncJob, SyncStore, SyncView } from "../ports";
import { statement, type Queryable, type Statement } from "./connection";
import { answer } from "./faults";
import { recordTables } from "./schema";

const syncColumns =
  `id, environment_id AS "environmentId", resource, created_at AS "createdAt", expires_at AS "expiresAt", opened_after_sequence AS "openedAfterSequence", ` +
  `completed_at AS "completedAt", completed_by_job_id AS "completedByJobId", records_sent AS "recordsSent", failures_told_through AS "failuresToldThrough"`;
const syncJobColumns = `id, operation, status, dry_run AS "dryRun", output, completed_at AS "completedAt", record_count AS "recordCount", sequence`;

type SyncJobRow = Pick<JobRow, "id" | "operation" | "status" | "dryRun" | "output" | "completedAt" | "recordCount"> & { sequence: number };
const toSyncJob = (row: SyncJobRow): SyncJob => {
  const { id, operation, status, dryRun, output, completedAt, recordCount } = toJob({ ...row, environmentId: 0, type: "", createdAt: "", startedAt: null, attempts: 0, syncId: null });
  return { id, operation, status, dryRun, output, completedAt, recordCount, sequence: row.sequence };
};

// The environment's last sequence is read, not locked: an intake committing meanwhile numbers its job after it, and
// that job (outside the sync) counts as written after the opening, which keeps its records: the safe side.
const insert = statement(
  `INSERT INTO syncs (environment_id, resource, created_at, expires_at, opened_after_sequence)
   VALUES ($1, $2, $3, $4, coalesce((SELECT last_sequence FROM job_sequences WHERE environment_id = $1), 0)) RETURNING ${syncColumns}`,
);
const byId = statement(`SELECT ${syncColumns} FROM syncs WHERE id = $1 AND environment_id = $2`);
const jobsOf = statement(
  `SELECT ${syncJobColumns} FROM jobs WHERE sync_id = $1 AND sequence < coalesce((SELECT sequence FROM jobs WHERE id = $2), 9223372036854775807) ORDER BY sequence`,
);
const marked = statement(`SELECT count(*)::integer AS count FROM sync_records WHERE sync_id = $1 AND NOT dry_run`, { bulk: true });
// Nothing once the sync has ended (see sqlite/syncs.ts). DISTINCT: a batch refused for a repeated id is marked too, and
// an upsert may not touch a row twice in one statement.
const markIds = statement(
  `INSERT INTO sync_records (sync_id, id, dry_run) SELECT $1, id, $3 FROM (SELECT DISTINCT id FROM unnest($2::text[]) AS ids(id)) AS sent
   WHERE EXISTS (SELECT 1 FROM syncs WHERE id = $1 AND completed_at IS NULL)
   ON CONFLICT (sync_id, id) DO UPDATE SET dry_run = false WHERE NOT excluded.dry_run AND sync_records.dry_run`,
  { bulk: true },
);
const completeSync = statement(
  `UPDATE syncs SET completed_at = $3, completed_by_job_id = $2, records_sent = (SELECT count(*) FROM sync_records WHERE sync_id = $1 AND NOT dry_run) WHERE id = $1`,
  { bulk: true },
);
const dropAll = statement(`DELETE FROM sync_records WHERE sync_id = $1`, { bulk: true });
const toldThrough = statement(`UPDATE syncs SET failures_told_through = $2 WHERE id = $1`);

/** Syncs (DECISIONS 13's mirror) on PostgreSQL: see sqlite/syncs.ts; the marks go as one array a job. */
export class PostgresSyncs implements SyncStore {
  private readonly unsentStatements = new Map<string, { ids: Statement; count: Statement }>();

  constructor(private readonly any: Queryable) {}

  open(environmentId: number, resource: string, lifetimeMs: number): Promise<Sync> {
    const now = Date.now();
    return answer(async () => (await this.any.query<Sync>(insert(environmentId, resource, new Date(now).toISOString(), new Date(now + lifetimeMs).toISOString())))[0]!);
  }

  find(environmentId: number, id: number): Promise<Sync | undefined> {
    return answer(async () => (await this.any.query<Sync>(byId(id, environmentId)))[0]);
  }

  view(environmentId: number, id: number): Promise<SyncView | undefined> {
    return answer(async () => {
      const [sync] = await this.any.query<Sync>(byId(id, environmentId));
      if (!sync) return undefined;
      const jobs = (await this.any.query<SyncJobRow>(jobsOf(id, 0))).map(toSyncJob);
      const [{ count }] = (await this.any.query<{ count: number }>(marked(id))) as [{ count: number }];
      return { ...sync, jobs, recordsMarked: count };
    });
  }

  private unsentOf(resource: ResourceDefinition) {
    let statements = this.unsentStatements.get(resource.path);
    if (!statements) {
      const table = pg.escapeIdentifier(getTableName(recordTables[resource.path]!));
      // See sqlite/syncs.ts.
      statements = {
        ids: statement(
          `SELECT r.id FROM ${table} r WHERE r.environment_id = $1
           AND NOT EXISTS (SELECT 1 FROM sync_records m WHERE m.sync_id = $2 AND m.id = r.id AND (NOT m.dry_run OR $4))
           AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = r.last_job_id AND j.sequence > $3 AND j.sync_id IS DISTINCT FROM $2) ORDER BY r.id`,
          { bulk: true },
        ),
        count: statement(`SELECT count(*)::integer AS count FROM ${table} WHERE environment_id = $1`, { bulk: true }),
      };
      this.unsentStatements.set(resource.path, statements);
    }
    return statements;
  }

  /** Inside the run's transaction, on its connection. */
  forRun(run: Queryable, environmentId: number): RunSyncs {
    return {
      find: (syncId) => answer(async () => (await run.query<Sync>(byId(syncId, environmentId)))[0]),
      jobs: (syncId, beforeJobId) => answer(async () => (await run.query<SyncJobRow>(jobsOf(syncId, beforeJobId))).map(toSyncJob)),
      mark: (syncId, ids, { dryRun = false } = {}) => answer(async () => void (ids.length > 0 && (await run.query(markIds(syncId, ids, dryRun))))),
      unsent: (resource, sync, { dryRun = false } = {}) =>
        answer(async () => {
          const { ids, count } = this.unsentOf(resource);
          const unsent = (await run.query<{ id: string }>(ids(environmentId, sync.id, sync.openedAfterSequence, dryRun))).map((row) => row.id);
          const [{ count: records }] = (await run.query<{ count: number }>(count(environmentId))) as [{ count: number }];
          return { ids: unsent, records };
        }),
      complete: (syncId, jobId, completedAt) =>
        answer(async () => {
          // Its marks stay until the purge (jobs.ts): dropping 100k of them here cost the completion a third of its time.
          await run.query(completeSync(syncId, jobId, completedAt));
        }),
      dropMarks: (syncId) => answer(async () => void (await run.query(dropAll(syncId)))),
      tellFailures: (syncId, sequence) => answer(async () => void (await run.query(toldThrough(syncId, sequence)))),
    };
  }
}
