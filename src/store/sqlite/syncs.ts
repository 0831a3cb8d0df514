import type { Statement } from "bun:sqlite";
import { getTableName } from "drizzle-orm";
import type { ResourceDefinition } from "../../resources/definition";
import type { RunSyncs, Sync, SyncJob, SyncStore, SyncView } from "../ports";
import { toJob, type JobRow } from "../job-row";
import { writeTransaction, type Db } from "./database";
import { answer } from "./faults";
import { recordTables } from "./schema";

const syncColumns =
  `id, environment_id AS environmentId, resource, created_at AS createdAt, expires_at AS expiresAt, opened_after_sequence AS openedAfterSequence, ` +
  `completed_at AS completedAt, completed_by_job_id AS completedByJobId, records_sent AS recordsSent, failures_told_through AS failuresToldThrough`;
const syncJobColumns = `id, operation, status, dry_run AS dryRun, output, completed_at AS completedAt, record_count AS recordCount, sequence`;

type SyncJobRow = Pick<JobRow, "id" | "operation" | "status" | "dryRun" | "output" | "completedAt" | "recordCount"> & { sequence: number };
const toSyncJob = (row: SyncJobRow): SyncJob => {
  const { id, operation, status, dryRun, output, completedAt, recordCount } = toJob({ ...row, environmentId: 0, type: "", createdAt: "", startedAt: null, attempts: 0, syncId: null });
  return { id, operation, status, dryRun, output, completedAt, recordCount, sequence: row.sequence };
};

/**
 * Syncs (DECISIONS 13's mirror) on SQLite: opened and read on the HTTP thread, marked and completed inside runs. The
 * marks are written by a sync's jobs only, in one statement a job (json_each, as the tombstones are), so that an import
 * without a sync does no work here at all.
 */
export class SqliteSyncs implements SyncStore {
  private readonly lastSequence;
  private readonly insert;
  private readonly byId;
  private readonly jobsOf;
  private readonly marked;
  private readonly markIds;
  private readonly completeSync;
  private readonly dropAll;
  private readonly toldThrough;
  private readonly unsentStatements = new Map<string, { ids: Statement; count: Statement }>();

  constructor(private readonly db: Db) {
    const client = db.$client;
    this.lastSequence = client.query<{ last: number }, [number]>("SELECT coalesce((SELECT last_sequence FROM job_sequences WHERE environment_id = ?1), 0) AS last");
    this.insert = client.query<Sync, [number, string, string, string, number]>(
      `INSERT INTO syncs (environment_id, resource, created_at, expires_at, opened_after_sequence) VALUES (?1, ?2, ?3, ?4, ?5) RETURNING ${syncColumns}`,
    );
    this.byId = client.query<Sync, [number, number]>(`SELECT ${syncColumns} FROM syncs WHERE id = ?1 AND environment_id = ?2`);
    this.jobsOf = client.query<SyncJobRow, [number, number]>(
      `SELECT ${syncJobColumns} FROM jobs WHERE sync_id = ?1 AND sequence < coalesce((SELECT sequence FROM jobs WHERE id = ?2), 9e18) ORDER BY sequence`,
    );
    this.marked = client.query<{ count: number }, [number]>("SELECT count(*) AS count FROM sync_records WHERE sync_id = ?1 AND dry_run = 0");
    // Nothing once the sync has ended: an import that joined it before its completion was queued, and runs after it.
    // A real mark replaces a dry run's (schema.ts, sync_records); a dry run's never replaces a real one.
    const sent = "SELECT ?1, value, ?3 FROM json_each(?2) WHERE EXISTS (SELECT 1 FROM syncs WHERE id = ?1 AND completed_at IS NULL)";
    this.markIds = client.query<never, [number, string, number]>(
      `INSERT INTO sync_records (sync_id, id, dry_run) ${sent} ON CONFLICT (sync_id, id) DO UPDATE SET dry_run = 0 WHERE excluded.dry_run = 0 AND dry_run = 1`,
    );
    this.completeSync = client.query<never, [number, number, string]>(
      "UPDATE syncs SET completed_at = ?3, completed_by_job_id = ?2, records_sent = (SELECT count(*) FROM sync_records WHERE sync_id = ?1 AND dry_run = 0) WHERE id = ?1",
    );
    this.dropAll = client.query<never, [number]>("DELETE FROM sync_records WHERE sync_id = ?1");
    this.toldThrough = client.query<never, [number, number]>("UPDATE syncs SET failures_told_through = ?2 WHERE id = ?1");
  }

  open(environmentId: number, resource: string, lifetimeMs: number): Promise<Sync> {
    return answer(() =>
      writeTransaction(this.db, () => {
        const { last } = this.lastSequence.get(environmentId)!;
        const now = Date.now();
        return this.insert.get(environmentId, resource, new Date(now).toISOString(), new Date(now + lifetimeMs).toISOString(), last)!;
      }),
    );
  }

  find(environmentId: number, id: number): Promise<Sync | undefined> {
    return answer(() => this.byId.get(id, environmentId) ?? undefined);
  }

  view(environmentId: number, id: number): Promise<SyncView | undefined> {
    return answer(() => {
      const sync = this.byId.get(id, environmentId);
      if (!sync) return undefined;
      return { ...sync, jobs: this.jobsOf.all(id, 0).map(toSyncJob), recordsMarked: this.marked.get(id)!.count };
    });
  }

  private unsentOf(resource: ResourceDefinition) {
    let statements = this.unsentStatements.get(resource.path);
    if (!statements) {
      const table = `"${getTableName(recordTables[resource.path]!)}"`;
      // Kept: a record the sync's jobs sent, and one whose last writer is a job outside the sync numbered after its
      // opening (an unchanged record is not written, so its last writer is who last changed it). EXCEPT, because both
      // sides come in id order from their primary keys and SQLite merges them: a third faster than a NOT EXISTS probe
      // of the marks for each record (docs/performance.md, row d2).
      statements = {
        ids: this.db.$client.prepare(
          `SELECT id FROM (SELECT r.id AS id FROM ${table} r WHERE r.environment_id = ?1 ` +
            "AND r.last_job_id NOT IN (SELECT j.id FROM jobs j WHERE j.environment_id = ?1 AND j.sequence > ?3 AND j.sync_id IS NOT ?2) " +
            "EXCEPT SELECT m.id FROM sync_records m WHERE m.sync_id = ?2 AND (m.dry_run = 0 OR ?4)) ORDER BY id",
        ),
        count: this.db.$client.prepare(`SELECT count(*) AS count FROM ${table} WHERE environment_id = ?1`),
      };
      this.unsentStatements.set(resource.path, statements);
    }
    return statements;
  }

  /** Inside the run's transaction (the caller holds it), for the environment's run. */
  forRun(environmentId: number): RunSyncs {
    return {
      find: (syncId) => answer(() => this.byId.get(syncId, environmentId) ?? undefined),
      jobs: (syncId, beforeJobId) => answer(() => this.jobsOf.all(syncId, beforeJobId).map(toSyncJob)),
      mark: (syncId, ids, { dryRun = false } = {}) => answer(() => void (ids.length > 0 && this.markIds.run(syncId, JSON.stringify(ids), dryRun ? 1 : 0))),
      unsent: (resource, sync, { dryRun = false } = {}) =>
        answer(() => {
          const { ids, count } = this.unsentOf(resource);
          const unsent = (ids.all(environmentId, sync.id, sync.openedAfterSequence, dryRun ? 1 : 0) as Array<{ id: string }>).map((row) => row.id);
          return { ids: unsent, records: (count.get(environmentId) as { count: number }).count };
        }),
      complete: (syncId, jobId, completedAt) =>
        answer(() => {
          // Its marks stay until the purge (jobs.ts): dropping 100k of them here cost the completion a third of its time.
          this.completeSync.run(syncId, jobId, completedAt);
        }),
      dropMarks: (syncId) => answer(() => void this.dropAll.run(syncId)),
      tellFailures: (syncId, sequence) => answer(() => void this.toldThrough.run(syncId, sequence)),
    };
  }
}
