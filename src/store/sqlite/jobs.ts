import { and, asc, desc, eq, gt, gte, inArray, isNotNull, lt, or, sql } from "drizzle-orm";
import { JobOperation, JobStatus, type JobOutput } from "../../domain/job";
import { StaleClaim } from "../errors";
import { idempotencyWindowStart } from "../idempotency";
import { endedJobs, isRetained, toJob, type JobRow } from "../job-row";
import type {
  ClaimedRun,
  ClaimRequest,
  Completion,
  Enqueued,
  EnqueueRequest,
  Job,
  JobListOptions,
  JobQueue,
  JobReads,
  OutboxRows,
  QueueHead,
  RejectedRecord,
  RunLimits,
  RunRecords,
} from "../ports";
import { checkpointPassively, unsyncedWriteTransaction, writeTransaction, writeTransactionAsync, type Db } from "./database";
import { answer, translateFault } from "./faults";
import { RecordTables } from "./records";
import { environments, idempotencyKeys, jobPayloads, jobRejections, jobs, recordTables, syncRecords, syncs, tombstones } from "./schema";
import { SqliteWebhooks } from "./webhooks";


// Rows per INSERT: 5 columns each, well under SQLite's 32,766 bound parameters.
const rejectionChunk = 1000;
// After a run's commit, its thread checkpoints the WAL (connections never do it inside a commit, see
// openDatabase): after big runs, or at most once a second, since a checkpoint syncs the database file. It is the
// store's upkeep (Store.takeUpkeep), which the thread does once the run's answer has gone.
const checkpointAfterRecords = 1_000;
const checkpointEveryMs = 1_000;

const now = () => new Date().toISOString();

/**
 * The oldest pending job of each environment with no run in progress: a few index seeks per environment. Asked
 * on the HTTP thread after every run and many intakes. CROSS JOIN keeps environments as the outer loop: with a
 * plain JOIN, SQLite chose to scan every job, finished ones included (3.6 ms with 6,400 jobs, and more with each
 * day of retention), running the subqueries for each.
 */
export const queueHeadsSql =
  "SELECT e.id AS environmentId, j.id AS jobId, j.attempts AS attempts FROM environments e " +
  "CROSS JOIN jobs j ON j.environment_id = e.id AND j.sequence = (SELECT min(p.sequence) FROM jobs p WHERE p.environment_id = e.id AND p.status = ?1) " +
  "WHERE NOT EXISTS (SELECT 1 FROM jobs r WHERE r.environment_id = e.id AND r.status = ?2) ORDER BY j.id";

/**
 * The job queue on SQLite. One process owns the database (the data directory's lock), and its threads take
 * turns writing (WriteLock), so a write transaction sees and decides alone: the claim's reads and its update
 * are one transaction, and that is what makes "one run per environment" and "oldest first" hold.
 */
export class SqliteJobQueue implements JobQueue {
  // Prepared once: intake and every run use these, and building (and compiling) a statement each time
  // cost more than running it.
  private readonly insertJob;
  private readonly nextSequence;
  private readonly insertPayload;
  private readonly payloadById;
  private readonly pendingJobs;
  private readonly runInProgress;
  private readonly claimJobs;
  private readonly releaseRun;
  private readonly heldByRun;
  private readonly storeOutcome;
  private readonly deletePayloads;
  private readonly queueHeads;
  private readonly tables: RecordTables;
  // Writes a job's webhook deliveries in the transaction that ends it (the outbox), as `outboxRows` makes them.
  private readonly outbox: SqliteWebhooks;
  private lastCheckpoint = 0;
  private checkpointDue = false;

  constructor(
    private readonly db: Db,
    private readonly outboxRows: OutboxRows,
  ) {
    this.tables = new RecordTables(db);
    this.outbox = new SqliteWebhooks(db);
    // The statements on every small job's path (its intake, its run's claim and end) are written out in SQL: they
    // run inside the write lock every small job waits on, and there Drizzle's mapping of rows and parameters cost
    // more than the statements themselves (docs/performance.md, "Round three, third part"). The intake's job row
    // is known but for its id.
    this.insertJob = db.$client.query<never, [number, string, number, string, number, number, string, number | null]>(
      "INSERT INTO jobs (environment_id, type, status, record_count, created_at, sequence, dry_run, operation, sync_id) " +
        `VALUES (?1, ?2, '${JobStatus.Pending}', ?3, ?4, ?5, ?6, ?7, ?8)`,
    );
    this.nextSequence = db.$client.query<{ sequence: number }, [number]>(
      "INSERT INTO job_sequences (environment_id, last_sequence) VALUES (?1, 1) " +
        "ON CONFLICT (environment_id) DO UPDATE SET last_sequence = last_sequence + 1 RETURNING last_sequence AS sequence",
    );
    this.insertPayload = db.$client.query<never, [number, Uint8Array]>("INSERT INTO job_payloads (job_id, body) VALUES (?1, ?2)");
    this.payloadById = db
      .select({ body: jobPayloads.body })
      .from(jobPayloads)
      .where(eq(jobPayloads.jobId, sql.placeholder("id")))
      .prepare();
    // Each of these is one seek on jobs_environment_status_idx. The first pending job, and those that may go along.
    this.pendingJobs = db.$client.query<JobRow & { sequence: number }, [number, number]>(
      "SELECT id, environment_id AS environmentId, type, status, record_count AS recordCount, created_at AS createdAt, " +
        "started_at AS startedAt, completed_at AS completedAt, output, attempts, sequence, dry_run AS dryRun, operation, sync_id AS syncId " +
        `FROM jobs WHERE environment_id = ?1 AND status = '${JobStatus.Pending}' ORDER BY sequence LIMIT ?2`,
    );
    this.runInProgress = db
      .select({ id: jobs.id })
      .from(jobs)
      .where(and(eq(jobs.environmentId, sql.placeholder("environmentId")), eq(jobs.status, JobStatus.Processing)))
      .limit(1)
      .prepare();
    // A run's jobs in one statement: the environment's pending ones from its first to its last sequence, read just
    // before in the same transaction. Only the first starts now.
    this.claimJobs = db.$client.query<never, [string, number, string, number, number, number]>(
      `UPDATE jobs SET status = '${JobStatus.Processing}', claim_token = ?1, attempts = attempts + 1, started_at = CASE WHEN id = ?2 THEN ?3 END ` +
        `WHERE environment_id = ?4 AND status = '${JobStatus.Pending}' AND sequence BETWEEN ?5 AND ?6`,
    );
    this.releaseRun = db
      .update(jobs)
      .set({ status: JobStatus.Pending, claimToken: null, startedAt: null, attempts: sql`${jobs.attempts} - ${sql.placeholder("uncount")}` })
      .where(and(eq(jobs.claimToken, sql.placeholder("token")), eq(jobs.status, JobStatus.Processing)))
      .prepare();
    this.heldByRun = db
      .select({ count: sql<number>`count(*)` })
      .from(jobs)
      .where(and(eq(jobs.claimToken, sql.placeholder("token")), eq(jobs.status, JobStatus.Processing)))
      .prepare();
    // A run's end: one update a job, and the payloads of all its jobs dropped in one statement.
    this.storeOutcome = db.$client.query<never, [string, string, string, number, string]>(
      "UPDATE jobs SET status = ?1, output = ?2, started_at = coalesce(started_at, ?3), completed_at = ?3, claim_token = NULL " +
        "WHERE id = ?4 AND claim_token = ?5",
    );
    this.deletePayloads = db.$client.query<never, [string]>(
      `DELETE FROM job_payloads WHERE job_id IN (SELECT id FROM jobs WHERE claim_token = ?1 AND status = '${JobStatus.Processing}')`,
    );
    // Written out: Drizzle leaves the table names off the columns, and the correlated subqueries need them.
    this.queueHeads = db.$client.query<QueueHead, [string, string]>(queueHeadsSql);
  }

  enqueue(requests: EnqueueRequest[]): Promise<Enqueued[]> {
    return answer(() => writeTransaction(this.db, (tx) => requests.map((request) => this.enqueueOne(tx, request))));
  }

  // The sequence number is taken in the same transaction, after the idempotency check (one writer at a time
  // here, so no lock order to keep): an environment's jobs are numbered in the order they commit.
  private enqueueOne(tx: Db, { environmentId, type, recordCount, body, idempotency, dryRun = false, operation = JobOperation.Upsert, syncId }: EnqueueRequest): Enqueued {
    if (idempotency) {
      const where = and(eq(idempotencyKeys.environmentId, environmentId), eq(idempotencyKeys.key, idempotency.key));
      const earlier = tx.select().from(idempotencyKeys).where(where).get();
      if (earlier && earlier.createdAt >= idempotencyWindowStart()) {
        if (earlier.requestHash !== idempotency.requestHash) return { conflict: true };
        const job = tx.select().from(jobs).where(eq(jobs.id, earlier.jobId)).get();
        if (job) return { job: toJob(job), replayed: true };
      }
      if (earlier) tx.delete(idempotencyKeys).where(where).run();
    }
    const { sequence } = this.nextSequence.get(environmentId)!;
    const createdAt = now();
    const id = Number(this.insertJob.run(environmentId, type, recordCount, createdAt, sequence, dryRun ? 1 : 0, operation, syncId ?? null).lastInsertRowid);
    this.insertPayload.run(id, body);
    if (idempotency) {
      tx.insert(idempotencyKeys).values({ environmentId, key: idempotency.key, requestHash: idempotency.requestHash, jobId: id, createdAt }).run();
    }
    const job: Job = { id, environmentId, type, status: JobStatus.Pending, recordCount, createdAt, startedAt: null, completedAt: null, output: null, attempts: 0, dryRun, operation, syncId: syncId ?? null };
    return { job, replayed: false };
  }

  heads(): Promise<QueueHead[]> {
    return answer(() => this.queueHeads.all(JobStatus.Pending, JobStatus.Processing));
  }

  /**
   * Where a run is claimed. In one transaction: a run of the environment in progress means nothing to
   * claim; otherwise its oldest pending job is the run's first, and, when it is small and was never tried
   * (a job that was tried before runs alone, so that one that crashes its run is found and given up alone),
   * the small untried jobs queued right after it go along. Each is marked Processing with the run's token,
   * and its attempt counted: the count survives a crash of the whole process, which is how a job that
   * kills the process every time it runs is given up after a few restarts (see jobs/apply.ts).
   * The commit is not synced (see unsyncedWriteTransaction): a claim lost in a power cut costs one attempt's
   * count, not a job, and a synced commit per run would double the fsyncs of small jobs.
   */
  claimRun(request: ClaimRequest, limits: RunLimits): Promise<ClaimedRun | undefined> {
    return answer(() =>
      unsyncedWriteTransaction(this.db, () => {
        const { token, environmentId } = request;
        const { takeOver } = request;
        if (takeOver) this.releaseRun.run({ token: takeOver.token, uncount: takeOver.countsAsAttempt ? 0 : 1 });
        if (this.runInProgress.get({ environmentId })) return undefined;
        const [first, ...after] = this.pendingJobs.all(environmentId, limits.maxJobs);
        if (!first) return undefined;
        const group = [first];
        if (!request.alone && first.attempts === 0 && !first.dryRun && first.recordCount <= limits.maxRecords) {
          let records = first.recordCount;
          for (const job of after) {
            records += job.recordCount;
            if (records > limits.maxRecords || job.attempts > 0 || job.dryRun) break;
            group.push(job);
          }
        }
        // A job taken along starts, as its document tells, when the one before it ends: at completion (storeOutcome).
        const startedAt = now();
        const { changes } = this.claimJobs.run(token, first.id, startedAt, environmentId, first.sequence, group.at(-1)!.sequence);
        if (changes !== group.length) throw new Error(`claimed ${changes} jobs for a run of ${group.length}`);
        const claimed = group.map((job, index) => toJob({ ...job, status: JobStatus.Processing, attempts: job.attempts + 1, startedAt: index === 0 ? startedAt : null }));
        return { token, environmentId, jobs: claimed };
      }),
    );
  }

  payload(jobId: number): Promise<Uint8Array | undefined> {
    return answer(() => this.payloadById.get({ id: jobId })?.body);
  }

  async completeRun(run: ClaimedRun, apply: (records: RunRecords) => Promise<Completion[]>): Promise<void> {
    let records = 0;
    try {
      await writeTransactionAsync(this.db, async () => {
        if (this.heldByRun.get({ token: run.token })!.count !== run.jobs.length) {
          throw new StaleClaim(`run ${run.token} no longer holds its jobs (${run.jobs.map((job) => job.id).join(", ")})`);
        }
        const completions = await apply(this.tables.forRun(run.environmentId));
        const completedAt = now();
        // Before the outcomes, while the run's token still marks its jobs.
        this.deletePayloads.run(run.token);
        for (const { jobId, status, output, rejected } of completions) {
          this.storeOutcome.run(status, JSON.stringify(output), completedAt, jobId, run.token);
          this.insertRejections(jobId, rejected);
          records += output.total;
        }
        this.outbox.writeOutbox(run.environmentId, endedJobs(run, completions, completedAt), this.outboxRows);
      });
    } catch (error) {
      throw translateFault(error);
    }
    if (records >= checkpointAfterRecords || performance.now() - this.lastCheckpoint >= checkpointEveryMs) {
      this.lastCheckpoint = performance.now();
      this.checkpointDue = true;
    }
  }

  /**
   * The checkpoint a run left due, to be done after the run's answer has gone, not before it: a checkpoint after a
   * big run took 40 to 140 ms, on the path of every job's end. Its thread says it is busy meanwhile (the worker
   * pool's upkeep), so that the next intake goes to another thread instead of waiting it out. The WAL stays as
   * bounded: the checkpoint is the same, a moment later, before this thread's next task.
   */
  takeCheckpoint(): (() => void) | undefined {
    if (!this.checkpointDue) return undefined;
    this.checkpointDue = false;
    return () => void checkpointPassively(this.db);
  }

  // A claim holds nothing but its jobs' tokens here: the next claim takes them over.
  async abandonRun(_run: ClaimedRun): Promise<void> {}

  private insertRejections(jobId: number, rejected: RejectedRecord[]): void {
    for (let start = 0; start < rejected.length; start += rejectionChunk) {
      this.db
        .insert(jobRejections)
        .values(rejected.slice(start, start + rejectionChunk).map((row) => ({ ...row, jobId })))
        .run();
    }
  }

  /**
   * Start-up: the process that claimed these runs is gone (one process owns the data directory), so each
   * Processing job goes back to Pending and is run again from the start, its attempts kept. Its transaction
   * never committed, so nothing of it was applied; upserts make the rerun safe anyway.
   */
  recoverInterrupted(): Promise<number> {
    return answer(() =>
      writeTransaction(this.db, (tx) => {
        // So are the claims of webhook deliveries it was sending: they are sent again (at least once).
        this.outbox.recoverClaims();
        return tx
          .update(jobs)
          .set({ status: JobStatus.Pending, startedAt: null, claimToken: null })
          .where(eq(jobs.status, JobStatus.Processing))
          .returning({ id: jobs.id })
          .all().length;
      }),
    );
  }

  cancel(environmentId: number, jobId: number, output: JobOutput): Promise<{ job: Job; canceled: boolean } | undefined> {
    return answer(() =>
      writeTransaction(this.db, (tx) => {
        const [canceled] = tx
          .update(jobs)
          .set({ status: JobStatus.Failed, output: JSON.stringify(output), completedAt: now(), claimToken: null })
          .where(and(eq(jobs.id, jobId), eq(jobs.environmentId, environmentId), eq(jobs.status, JobStatus.Pending)))
          .returning()
          .all();
        if (canceled) {
          tx.delete(jobPayloads).where(eq(jobPayloads.jobId, jobId)).run();
          this.outbox.writeOutbox(environmentId, [toJob(canceled)], this.outboxRows);
          return { job: toJob(canceled), canceled: true };
        }
        const [job] = tx.select().from(jobs).where(and(eq(jobs.id, jobId), eq(jobs.environmentId, environmentId))).all();
        return job && { job: toJob(job), canceled: false };
      }),
    );
  }

  purge(before: string): Promise<number> {
    return answer(() =>
      writeTransaction(this.db, (tx) => {
        tx.delete(idempotencyKeys).where(lt(idempotencyKeys.createdAt, idempotencyWindowStart())).run();
        // Kept as long as the jobs that deleted them (DECISIONS 13). Positions follow deletedAt (schema.ts): the purge
        // takes, in each environment's resource, every position before the first one deleted since `before`, walking
        // only the ones it purges (the positions are indexed by environment and resource, not across them).
        for (const { id: environmentId } of tx.select({ id: environments.id }).from(environments).all()) {
          for (const resource of Object.keys(recordTables)) {
            const ofResource = and(eq(tombstones.environmentId, environmentId), eq(tombstones.resource, resource));
            const kept = tx.select({ position: tombstones.position }).from(tombstones).where(and(ofResource, gte(tombstones.deletedAt, before))).orderBy(tombstones.position).limit(1);
            const end = tx.select({ end: sql`max(${tombstones.position}) + 1` }).from(tombstones).where(ofResource);
            tx.delete(tombstones).where(and(ofResource, lt(tombstones.position, sql`coalesce((${kept}), (${end}))`))).run();
          }
        }
        // A sync that ended (completed, or expired) keeps no marks: nothing reads them again. The sync itself goes with
        // the jobs of its time.
        tx.delete(syncRecords).where(inArray(syncRecords.syncId, tx.select({ id: syncs.id }).from(syncs).where(or(isNotNull(syncs.completedAt), lt(syncs.expiresAt, now()))))).run();
        tx.delete(syncs).where(lt(sql`coalesce(${syncs.completedAt}, ${syncs.expiresAt})`, before)).run();
        return tx.delete(jobs).where(lt(jobs.completedAt, before)).returning({ id: jobs.id }).all().length;
      }),
    );
  }
}

/** Reads about jobs; the HTTP thread's. */
export class SqliteJobReads implements JobReads {
  private readonly byId;

  constructor(private readonly db: Db) {
    this.byId = db
      .select()
      .from(jobs)
      .where(and(eq(jobs.id, sql.placeholder("id")), eq(jobs.environmentId, sql.placeholder("environmentId"))))
      .prepare();
  }

  find(environmentId: number, id: number, retainedSince: string): Promise<Job | undefined> {
    return answer(() => {
      const job = this.byId.get({ id, environmentId });
      if (!job || !isRetained(job, retainedSince)) return undefined;
      return toJob(job);
    });
  }

  list(environmentId: number, options: JobListOptions): Promise<Job[]> {
    return answer(() =>
      this.db
        .select()
        .from(jobs)
        .where(
          and(
            eq(jobs.environmentId, environmentId),
            options.status ? eq(jobs.status, options.status) : undefined,
            options.type !== undefined ? eq(jobs.type, options.type) : undefined,
            options.dryRun !== undefined ? eq(jobs.dryRun, options.dryRun) : undefined,
            options.operation !== undefined ? eq(jobs.operation, options.operation) : undefined,
            options.after !== undefined ? lt(jobs.id, options.after) : undefined,
            sql`(${jobs.completedAt} IS NULL OR ${jobs.completedAt} >= ${options.retainedSince})`,
          ),
        )
        .orderBy(desc(jobs.id))
        .limit(options.limit)
        .all()
        .map(toJob),
    );
  }

  rejections(jobId: number, limit: number, after?: number): Promise<RejectedRecord[]> {
    return answer(() =>
      this.db
        .select({ position: jobRejections.position, field: jobRejections.field, message: jobRejections.message, record: jobRejections.record })
        .from(jobRejections)
        .where(and(eq(jobRejections.jobId, jobId), after !== undefined ? gt(jobRejections.position, after) : undefined))
        .orderBy(asc(jobRejections.position))
        .limit(limit)
        .all(),
    );
  }

  countByStatus(): Promise<Array<{ status: JobStatus; count: number }>> {
    return answer(
      () => this.db.select({ status: jobs.status, count: sql<number>`count(*)` }).from(jobs).groupBy(jobs.status).all() as Array<{ status: JobStatus; count: number }>,
    );
  }

  queueDepth(): Promise<Array<{ environment: string; pending: number }>> {
    return answer(() =>
      this.db
        .select({ environment: environments.slug, pending: sql<number>`count(${jobs.id})` })
        .from(environments)
        .leftJoin(jobs, and(eq(jobs.environmentId, environments.id), eq(jobs.status, JobStatus.Pending)))
        .groupBy(environments.id)
        .orderBy(asc(environments.slug))
        .all(),
    );
  }
}
