import { and, asc, desc, eq, gt, inArray, lt, sql } from "drizzle-orm";
import { writeTransaction, type Db } from "../db/client";
import { environments, idempotencyKeys, jobPayloads, jobRejections, jobs } from "../db/schema";
import type { JobOutput } from "./outcome";
import { JobStatus } from "./states";

export type Job = typeof jobs.$inferSelect;
export type Idempotency = { key: string; requestHash: string };
/** `body`: the payload as it is to be stored (see payload.ts). */
export type EnqueueRequest = { environmentId: number; type: string; recordCount: number; body: Uint8Array; idempotency?: Idempotency };
export type Enqueued = { job: Job; replayed: boolean; conflict?: undefined } | { conflict: true };

/** How long an Idempotency-Key is remembered. */
export const idempotencyWindowMs = 24 * 60 * 60 * 1000;
const idempotencyWindowStart = () => new Date(Date.now() - idempotencyWindowMs).toISOString();
export type RejectedRecord = Omit<typeof jobRejections.$inferInsert, "jobId">;

// Rows per INSERT: 5 columns each, well under SQLite's 32,766 bound parameters.
const rejectionChunk = 1000;

const now = () => new Date().toISOString();

/** Every SQL statement about jobs. The HTTP thread only reads; workers write. */
export class JobRepository {
  private readonly byId;
  private readonly nextPending;
  // Prepared once: intake and apply run these for every job, and building (and compiling) a statement each
  // time cost more than running it.
  private readonly insertJob;
  private readonly insertPayload;
  private readonly payloadById;
  private readonly unfinishedById;
  private readonly finishJob;
  private readonly deletePayload;

  constructor(private readonly db: Db) {
    this.insertJob = db
      .insert(jobs)
      .values({
        environmentId: sql.placeholder("environmentId"),
        type: sql.placeholder("type"),
        status: sql.placeholder("status"),
        recordCount: sql.placeholder("recordCount"),
        createdAt: sql.placeholder("createdAt"),
      })
      .returning()
      .prepare();
    this.insertPayload = db
      .insert(jobPayloads)
      .values({ jobId: sql.placeholder("jobId"), body: sql.placeholder("body") })
      .prepare();
    this.unfinishedById = db
      .select()
      .from(jobs)
      .where(and(eq(jobs.id, sql.placeholder("id")), inArray(jobs.status, [JobStatus.Pending, JobStatus.Processing])))
      .prepare();
    this.payloadById = db
      .select({ body: jobPayloads.body })
      .from(jobPayloads)
      .where(eq(jobPayloads.jobId, sql.placeholder("id")))
      .prepare();
    this.finishJob = db
      .update(jobs)
      .set({
        status: sql.placeholder("status") as never,
        output: sql.placeholder("output") as never,
        // A job applied along with the one before it was never claimed on its own: it starts as it completes.
        startedAt: sql`coalesce(${jobs.startedAt}, ${sql.placeholder("completedAt")})`,
        completedAt: sql.placeholder("completedAt") as never,
      })
      .where(eq(jobs.id, sql.placeholder("id")))
      .prepare();
    this.deletePayload = db
      .delete(jobPayloads)
      .where(eq(jobPayloads.jobId, sql.placeholder("id")))
      .prepare();
    // Written out: Drizzle leaves the table names off the columns, and the correlated subquery needs them.
    this.nextPending = db.$client.query<{ environmentId: number; jobId: number }, [string]>(
      "SELECT environmentId, jobId FROM (SELECT e.id AS environmentId, (SELECT min(j.id) FROM jobs j WHERE j.environment_id = e.id AND j.status = ?) AS jobId FROM environments e) WHERE jobId IS NOT NULL ORDER BY jobId",
    );
    this.byId = db
      .select()
      .from(jobs)
      .where(and(eq(jobs.id, sql.placeholder("id")), eq(jobs.environmentId, sql.placeholder("environmentId"))))
      .prepare();
  }

  /**
   * Stores each job with its payload, all in one transaction (one fsync for the lot); once this returns,
   * they survive a crash. Answers in the order asked. With an idempotency key: the same key and request
   * within 24 hours return the job stored then (`replayed`, also for a repeat within this call), the same
   * key with another request is refused, and an older key is used afresh.
   */
  enqueueAll(requests: EnqueueRequest[]): Enqueued[] {
    return writeTransaction(this.db, (tx) => requests.map((request) => this.enqueueOne(tx, request)));
  }

  /** One job: see enqueueAll. */
  enqueue(environmentId: number, type: string, recordCount: number, body: Uint8Array, idempotency?: Idempotency): Enqueued {
    return this.enqueueAll([{ environmentId, type, recordCount, body, idempotency }])[0]!;
  }

  private enqueueOne(tx: Db, { environmentId, type, recordCount, body, idempotency }: EnqueueRequest): Enqueued {
    if (idempotency) {
      const where = and(eq(idempotencyKeys.environmentId, environmentId), eq(idempotencyKeys.key, idempotency.key));
      const earlier = tx.select().from(idempotencyKeys).where(where).get();
      if (earlier && earlier.createdAt >= idempotencyWindowStart()) {
        if (earlier.requestHash !== idempotency.requestHash) return { conflict: true };
        const job = tx.select().from(jobs).where(eq(jobs.id, earlier.jobId)).get();
        if (job) return { job, replayed: true };
      }
      if (earlier) tx.delete(idempotencyKeys).where(where).run();
    }
    const job = this.insertJob.get({ environmentId, type, status: JobStatus.Pending, recordCount, createdAt: now() })!;
    this.insertPayload.run({ jobId: job.id, body });
    if (idempotency) {
      tx.insert(idempotencyKeys).values({ environmentId, key: idempotency.key, requestHash: idempotency.requestHash, jobId: job.id, createdAt: job.createdAt }).run();
    }
    return { job, replayed: false };
  }

  /** The environment's job, or undefined for an unknown id, another environment's job or one past retention. */
  find(environmentId: number, id: number, retainedSince: string): Job | undefined {
    const job = this.byId.get({ id, environmentId });
    if (!job || (job.completedAt !== null && job.completedAt < retainedSince)) return undefined;
    return job;
  }

  /** Newest first; `after` is the id of the last job of the previous page. */
  list(environmentId: number, options: { status?: string; limit: number; after?: number; retainedSince: string }): Job[] {
    return this.db
      .select()
      .from(jobs)
      .where(
        and(
          eq(jobs.environmentId, environmentId),
          options.status ? eq(jobs.status, options.status) : undefined,
          options.after !== undefined ? lt(jobs.id, options.after) : undefined,
          sql`(${jobs.completedAt} IS NULL OR ${jobs.completedAt} >= ${options.retainedSince})`,
        ),
      )
      .orderBy(desc(jobs.id))
      .limit(options.limit)
      .all();
  }

  /**
   * The oldest pending job of each environment that has one, oldest first. Asked after every finished job:
   * one index seek per environment (jobs_environment_status_idx), not a scan of everything pending.
   */
  nextPendingPerEnvironment(): Array<{ environmentId: number; jobId: number }> {
    return this.nextPending.all(JobStatus.Pending);
  }

  /** Jobs by status, all environments together (for the metrics). */
  countByStatus(): Array<{ status: string; count: number }> {
    return this.db.select({ status: jobs.status, count: sql<number>`count(*)` }).from(jobs).groupBy(jobs.status).all();
  }

  /** Pending jobs of every environment, 0 included (for the metrics). */
  queueDepth(): Array<{ environment: string; pending: number }> {
    return this.db
      .select({ environment: environments.slug, pending: sql<number>`count(${jobs.id})` })
      .from(environments)
      .leftJoin(jobs, and(eq(jobs.environmentId, environments.id), eq(jobs.status, JobStatus.Pending)))
      .groupBy(environments.id)
      .orderBy(asc(environments.slug))
      .all();
  }

  /**
   * Crash recovery: a job left Processing by a crash goes back to Pending and is run again from the start.
   * Its transaction never committed, so nothing of it was applied; upserts make the rerun safe anyway.
   */
  requeueInterrupted(): number {
    return this.db
      .update(jobs)
      .set({ status: JobStatus.Pending, startedAt: null })
      .where(eq(jobs.status, JobStatus.Processing))
      .returning({ id: jobs.id })
      .all().length;
  }

  /** The job if it is not terminal yet (Pending, or Processing after an interrupted attempt). */
  unfinished(id: number): Job | undefined {
    return this.unfinishedById.get({ id });
  }

  /** Marks the job Processing (visible to pollers at once) and counts the attempt. */
  claim(id: number): Job | undefined {
    return writeTransaction(this.db, (tx) =>
      tx
        .update(jobs)
        .set({ status: JobStatus.Processing, startedAt: now(), attempts: sql`${jobs.attempts} + 1` })
        .where(and(eq(jobs.id, id), inArray(jobs.status, [JobStatus.Pending, JobStatus.Processing])))
        .returning()
        .get(),
    );
  }

  /** Up to `limit` pending jobs of `job`'s environment queued after it, in id order. */
  pendingAfter(job: Job, limit: number): Job[] {
    return this.db
      .select()
      .from(jobs)
      .where(and(eq(jobs.environmentId, job.environmentId), eq(jobs.status, JobStatus.Pending), gt(jobs.id, job.id)))
      .orderBy(asc(jobs.id))
      .limit(limit)
      .all();
  }

  payload(id: number): Uint8Array | undefined {
    return this.payloadById.get({ id })?.body;
  }

  /** Records the terminal state and the rejected records, and drops the payload; call inside the job's apply transaction. */
  finish(id: number, status: JobStatus, output: JobOutput, rejected: RejectedRecord[] = []): void {
    this.finishJob.run({ id, status, output: JSON.stringify(output), completedAt: now() });
    for (let start = 0; start < rejected.length; start += rejectionChunk) {
      this.db
        .insert(jobRejections)
        .values(rejected.slice(start, start + rejectionChunk).map((row) => ({ ...row, jobId: id })))
        .run();
    }
    this.deletePayload.run({ id });
  }

  /** The job's rejected records in batch order, after the index `after`. */
  rejections(jobId: number, limit: number, after?: number): RejectedRecord[] {
    return this.db
      .select({ position: jobRejections.position, field: jobRejections.field, message: jobRejections.message, record: jobRejections.record })
      .from(jobRejections)
      .where(and(eq(jobRejections.jobId, jobId), after !== undefined ? gt(jobRejections.position, after) : undefined))
      .orderBy(asc(jobRejections.position))
      .limit(limit)
      .all();
  }

  /** Deletes job documents completed before `before` (returns how many), and idempotency keys past their 24 hours. */
  purgeCompletedBefore(before: string): number {
    this.db.delete(idempotencyKeys).where(lt(idempotencyKeys.createdAt, idempotencyWindowStart())).run();
    return this.db
      .delete(jobs)
      .where(lt(jobs.completedAt, before))
      .returning({ id: jobs.id })
      .all().length;
  }
}
