import { and, asc, desc, eq, gt, lt, placeholder, sql as drizzleSql } from "drizzle-orm";
import type { JobOutput } from "../../jobs/outcome";
import { JobStatus } from "../../jobs/states";
import { StaleClaim } from "../errors";
import { idempotencyWindowStart } from "../idempotency";
import { isRetained, toJob, type JobRow } from "../job-row";
import type {
  ClaimedRun,
  ClaimRequest,
  Completion,
  Enqueued,
  EnqueueRequest,
  Job,
  JobQueue,
  JobReads,
  QueueHead,
  RejectedRecord,
  RunLimits,
  RunRecords,
} from "../ports";
import type { Db, Sql } from "./connection";
import { answer, retried, translateFault } from "./faults";
import type { PostgresRecords } from "./records";
import type { Transaction, TransactionConnections } from "./transactions";
import { environments, jobRejections, jobs } from "./schema";

const now = () => new Date().toISOString();

/** The NOTIFY channel that tells every instance that work was queued. */
export const workChannel = "importd_work";
/** NOTIFY'd after a run commits, with its job ids (comma-separated): for the long polls of every instance. */
export const doneChannel = "importd_done";

// Jobs deleted per statement by the purge, so that it never holds many locks or a long transaction.
const purgeBatch = 1_000;
// The purge's session lock: one instance purges at a time.
const purgeLock = "importd purge";

const jobColumns = (sql: Sql) =>
  sql.unsafe(
    `id, environment_id AS "environmentId", type, status, record_count AS "recordCount", created_at AS "createdAt", ` +
      `started_at AS "startedAt", completed_at AS "completedAt", output, attempts, claim_token AS "claimToken", sequence, dry_run AS "dryRun"`,
  );
type ClaimRow = JobRow & { claimToken: string | null; sequence: number };

/**
 * The job queue on PostgreSQL, shared by any number of importd instances.
 *
 * Order: an intake numbers its jobs from its environment's row in job_sequences, which it locks (an UPDATE) in
 * the transaction that stores them; intakes of one environment therefore commit in the order of their numbers,
 * and runs take jobs by that number. Ids come from an identity column, taken before commit: not that order.
 *
 * Runs: a run holds its environment's row (FOR NO KEY UPDATE) for its whole transaction, on a connection of its
 * own, from the claim to the commit of its outcome; an instance that finds the row locked has nothing to claim.
 * The jobs it claims are marked Processing, their attempts counted, on another connection, committed at once:
 * pollers see them, and a run cut short still counts. A job the next holder of the lock finds Processing was
 * cut short (its instance died, its connection was lost): it is run again, its attempt counted. A run whose
 * connection was lost, or ended by idle_in_transaction_session_timeout, can commit nothing: fencing by the lock.
 */
export class PostgresJobQueue implements JobQueue {
  // The open transaction of each run of this thread, by token: held from claimRun to completeRun.
  private readonly runs = new Map<string, Transaction>();

  constructor(
    private readonly sql: Sql,
    private readonly records: PostgresRecords,
    private readonly transactions: TransactionConnections,
  ) {}

  /** `fn` in a transaction: committed if it resolves, rolled back if it throws. */
  private async inTransaction<T>(fn: (sql: Sql) => Promise<T>): Promise<T> {
    const transaction = await this.transactions.begin();
    try {
      const result = await fn(transaction.sql);
      await transaction.commit();
      return result;
    } finally {
      await transaction.rollback();
    }
  }

  enqueue(requests: EnqueueRequest[]): Promise<Enqueued[]> {
    return retried(async () => {
      const answers = await this.inTransaction(async (tx) => {
        const next = await this.takeSequences(tx, requests);
        const answers: Enqueued[] = [];
        for (const request of requests) answers.push(await this.enqueueOne(tx, request, next));
        return answers;
      });
      // After the commit, never inside it: a listener woken before the commit would find nothing.
      if (answers.some((answer) => !answer.conflict && !answer.replayed)) await this.sql.notify(workChannel, "").catch(() => {});
      return answers;
    });
  }

  /**
   * Locks each environment's sequence row, in ascending environment id (a fixed order, so that two intakes of
   * the same environments never deadlock), taking as many numbers as it has requests: the next number of each.
   */
  private async takeSequences(tx: Sql, requests: EnqueueRequest[]): Promise<Map<number, number>> {
    const counts = new Map<number, number>();
    for (const { environmentId } of requests) counts.set(environmentId, (counts.get(environmentId) ?? 0) + 1);
    const next = new Map<number, number>();
    for (const environmentId of [...counts.keys()].sort((a, b) => a - b)) {
      const count = counts.get(environmentId)!;
      const [row] = await tx`
        INSERT INTO job_sequences (environment_id, last_sequence) VALUES (${environmentId}, ${count})
        ON CONFLICT (environment_id) DO UPDATE SET last_sequence = job_sequences.last_sequence + excluded.last_sequence
        RETURNING last_sequence AS "last"`;
      next.set(environmentId, (row!.last as number) - count + 1);
    }
    return next;
  }

  // The idempotency key is checked after the environment's lock: two instances given the same key at once
  // take turns here, and the second finds the first's job.
  private async enqueueOne(tx: Sql, { environmentId, type, recordCount, body, idempotency, dryRun = false }: EnqueueRequest, next: Map<number, number>): Promise<Enqueued> {
    const sequence = next.get(environmentId)!;
    next.set(environmentId, sequence + 1);
    if (idempotency) {
      const [earlier] = await tx`
        SELECT request_hash AS "requestHash", job_id AS "jobId", created_at AS "createdAt" FROM idempotency_keys
        WHERE environment_id = ${environmentId} AND key = ${idempotency.key}`;
      if (earlier && earlier.createdAt >= idempotencyWindowStart()) {
        if (earlier.requestHash !== idempotency.requestHash) return { conflict: true };
        const [job] = await tx`SELECT ${jobColumns(tx)} FROM jobs WHERE id = ${earlier.jobId}`;
        if (job) return { job: toJob(job as ClaimRow), replayed: true };
      }
      if (earlier) await tx`DELETE FROM idempotency_keys WHERE environment_id = ${environmentId} AND key = ${idempotency.key}`;
    }
    const [job] = await tx`
      INSERT INTO jobs (environment_id, type, status, record_count, created_at, sequence, dry_run)
      VALUES (${environmentId}, ${type}, ${JobStatus.Pending}, ${recordCount}, ${now()}, ${sequence}, ${dryRun})
      RETURNING ${jobColumns(tx)}`;
    // As base64 text, decoded by the server: postgres.js sends a bytea parameter as hex, twice the size. For a 5 MB
    // payload (100k assets, compressed), measured alternating: hex 240–430 ms, base64 110–270 ms. (A binary COPY
    // was as fast, but postgres.js never finishes a COPY whose error comes after its end, so it is not used.)
    await tx`INSERT INTO job_payloads (job_id, body) VALUES (${job!.id}, decode(${Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("base64")}, 'base64'))`;
    if (idempotency) {
      await tx`
        INSERT INTO idempotency_keys (environment_id, key, request_hash, job_id, created_at)
        VALUES (${environmentId}, ${idempotency.key}, ${idempotency.requestHash}, ${job!.id}, ${job!.createdAt})`;
    }
    return { job: toJob(job as ClaimRow), replayed: false };
  }

  /**
   * Each environment's first job that is not terminal. Whether another instance runs it now is the lock's to
   * say (claimRun answers undefined then): a hint, as on every backend.
   */
  heads(): Promise<QueueHead[]> {
    return answer(async () => {
      const rows = await this.sql`
        SELECT DISTINCT ON (environment_id) environment_id AS "environmentId", id AS "jobId", attempts
        FROM jobs WHERE status IN (${JobStatus.Pending}, ${JobStatus.Processing})
        ORDER BY environment_id, sequence`;
      return (rows as unknown as QueueHead[]).sort((a, b) => a.jobId - b.jobId);
    });
  }

  /**
   * Claims the environment's next run: takes the environment's lock on a connection of its own and opens the
   * run's transaction there (completeRun commits it). Under the lock, the environment's first jobs that are not
   * terminal are read: the first is the run's; a job found Processing was cut short (in an instance that died or
   * was cut off) and runs alone, its attempt counted. A small untried first job takes the small untried pending
   * jobs after it along. `takeOver`, this process's own run cut short, first lets go of its jobs.
   */
  async claimRun(request: ClaimRequest, limits: RunLimits): Promise<ClaimedRun | undefined> {
    for (;;) {
      const claimed = await this.claimOnce(request, limits);
      if (claimed !== "again") return claimed;
    }
  }

  private claimOnce(request: ClaimRequest, limits: RunLimits): Promise<ClaimedRun | undefined | "again"> {
    return retried(async () => {
      const { token, environmentId, takeOver } = request;
      const transaction = await this.transactions.begin();
      const run = transaction.sql;
      let claimed = false;
      try {
        const locked = await run`SELECT id FROM environments WHERE id = ${environmentId} FOR NO KEY UPDATE SKIP LOCKED`;
        if (locked.length === 0) return undefined;
        // This process's own run, cut short, lets go of its jobs first (as on SQLite): they are claimed again
        // below like any pending job, and a storage fault's attempt is not counted against them.
        if (takeOver) {
          await this.sql`
            UPDATE jobs SET status = ${JobStatus.Pending}, claim_token = NULL, started_at = NULL,
              attempts = attempts - ${takeOver.countsAsAttempt ? 0 : 1}
            WHERE claim_token = ${takeOver.token} AND status = ${JobStatus.Processing}`;
        }
        const candidates = (await run`
          SELECT ${jobColumns(run)} FROM jobs
          WHERE environment_id = ${environmentId} AND status IN (${JobStatus.Pending}, ${JobStatus.Processing})
          ORDER BY sequence LIMIT ${request.alone ? 1 : limits.maxJobs}`) as unknown as ClaimRow[];
        const first = candidates[0];
        if (!first) return undefined;
        const group = [first];
        if (first.status === JobStatus.Pending && first.attempts === 0 && !first.dryRun && first.recordCount <= limits.maxRecords) {
          let records = first.recordCount;
          for (const job of candidates.slice(1)) {
            records += job.recordCount;
            if (records > limits.maxRecords || job.attempts > 0 || job.status !== JobStatus.Pending || job.dryRun) break;
            group.push(job);
          }
        }
        // Outside the run's transaction, committed at once: pollers see Processing, and the attempt is counted
        // even if this process dies before the run commits.
        const marked = (await this.sql`
          UPDATE jobs SET status = ${JobStatus.Processing}, claim_token = ${token},
            started_at = CASE WHEN id = ${first.id} THEN ${now()} ELSE NULL END,
            attempts = attempts + 1
          WHERE id IN ${this.sql(group.map((job) => job.id))} AND status IN (${JobStatus.Pending}, ${JobStatus.Processing})
          RETURNING ${jobColumns(this.sql)}`) as unknown as ClaimRow[];
        // Canceled since they were read (a cancel's row lock came first): the run goes without them, or, with
        // none left, the claim looks again.
        if (marked.length === 0) return "again" as const;
        marked.sort((a, b) => a.sequence - b.sequence);
        this.runs.set(token, transaction);
        claimed = true;
        return { token, environmentId, jobs: marked.map(toJob) };
      } finally {
        if (!claimed) await transaction.rollback();
      }
    });
  }

  payload(jobId: number): Promise<Uint8Array | undefined> {
    return answer(async () => {
      const [row] = await this.sql`SELECT body FROM job_payloads WHERE job_id = ${jobId}`;
      return row ? new Uint8Array(row.body as Buffer) : undefined;
    });
  }

  async completeRun(run: ClaimedRun, apply: (records: RunRecords) => Promise<Completion[]>): Promise<void> {
    const transaction = this.runs.get(run.token);
    if (!transaction) throw new StaleClaim(`run ${run.token} is not open in this thread`);
    this.runs.delete(run.token);
    const tx = transaction.sql;
    try {
      // Its own jobs only: a retry keeps its token, and takes over only the first job of the group it held.
      const ids = run.jobs.map((job) => job.id);
      const [held] = await tx`SELECT count(*)::int AS count FROM jobs WHERE id IN ${tx(ids)} AND claim_token = ${run.token} AND status = ${JobStatus.Processing}`;
      if (held!.count !== run.jobs.length) throw new StaleClaim(`run ${run.token} no longer holds its jobs (${run.jobs.map((job) => job.id).join(", ")})`);
      const completions = await apply(this.records.forRun(tx, run.environmentId));
      const completedAt = now();
      for (const { jobId, status, output, rejected } of completions) {
        await tx`
          UPDATE jobs SET status = ${status}, output = ${JSON.stringify(output)}, started_at = coalesce(started_at, ${completedAt}),
            completed_at = ${completedAt}, claim_token = NULL
          WHERE id = ${jobId} AND claim_token = ${run.token}`;
        await this.insertRejections(tx, jobId, rejected);
        await tx`DELETE FROM job_payloads WHERE job_id = ${jobId}`;
      }
      await transaction.commit();
      // After the commit: a poll woken before it would read the job unfinished.
      await this.sql.notify(doneChannel, run.jobs.map((job) => job.id).join(",")).catch(() => {});
    } catch (error) {
      throw translateFault(error);
    } finally {
      await transaction.rollback();
    }
  }

  async abandonRun(run: ClaimedRun): Promise<void> {
    const transaction = this.runs.get(run.token);
    if (!transaction) return;
    this.runs.delete(run.token);
    await transaction.rollback();
  }

  /** Rolls back the runs still open (a stop cut them short): their jobs are taken over by the next claim. */
  async abandonAll(): Promise<void> {
    const open = [...this.runs.values()];
    this.runs.clear();
    await Promise.all(open.map((transaction) => transaction.rollback()));
  }

  private async insertRejections(tx: Sql, jobId: number, rejected: RejectedRecord[]): Promise<void> {
    if (rejected.length === 0) return;
    await tx`
      INSERT INTO job_rejections (job_id, position, field, message, record)
      SELECT ${jobId}, * FROM unnest(
        ${rejected.map((row) => row.position)}::integer[], ${rejected.map((row) => row.field)}::text[],
        ${rejected.map((row) => row.message)}::text[], ${rejected.map((row) => row.record)}::text[])`;
  }

  /** Nothing: a run cut short is found Processing and taken over by the next holder of its environment's lock. */
  async recoverInterrupted(): Promise<number> {
    return 0;
  }

  /**
   * One instance at a time, in batches of purgeBatch jobs, each its own transaction: a batch runs only while
   * its transaction holds the purge lock (an instance that finds it taken leaves the purge to the other).
   */
  cancel(environmentId: number, jobId: number, output: JobOutput): Promise<{ job: Job; canceled: boolean } | undefined> {
    return retried(async () => {
      // Against a claim of the same job, the row lock decides: a claim's mark that commits first leaves it
      // Processing (and this finds it so), and one that comes after skips it (see claimRun).
      const canceled = await this.inTransaction(async (tx) => {
        const [row] = await tx`
          UPDATE jobs SET status = ${JobStatus.Failed}, output = ${JSON.stringify(output)}, completed_at = ${now()}, claim_token = NULL
          WHERE id = ${jobId} AND environment_id = ${environmentId} AND status = ${JobStatus.Pending}
          RETURNING ${jobColumns(tx)}`;
        if (row) await tx`DELETE FROM job_payloads WHERE job_id = ${jobId}`;
        return row as ClaimRow | undefined;
      });
      if (canceled) {
        await this.sql.notify(doneChannel, String(jobId)).catch(() => {});
        return { job: toJob(canceled), canceled: true };
      }
      const [row] = await this.sql`SELECT ${jobColumns(this.sql)} FROM jobs WHERE id = ${jobId} AND environment_id = ${environmentId}`;
      return row ? { job: toJob(row as ClaimRow), canceled: false } : undefined;
    });
  }

  purge(before: string): Promise<number> {
    return answer(async () => {
      await this.inTransaction((tx) => tx`DELETE FROM idempotency_keys WHERE created_at < ${idempotencyWindowStart()}`);
      let deleted = 0;
      for (;;) {
        const batch = await this.inTransaction(async (tx) => {
          const [lock] = await tx`SELECT pg_try_advisory_xact_lock(hashtext(${purgeLock})) AS got`;
          if (!lock!.got) return undefined;
          return (await tx`DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE completed_at < ${before} LIMIT ${purgeBatch}) RETURNING id`).length;
        });
        if (batch === undefined) return deleted;
        deleted += batch;
        if (batch < purgeBatch) return deleted;
      }
    });
  }
}

/** Reads about jobs; the HTTP thread's. */
export class PostgresJobReads implements JobReads {
  // Every status poll: prepared, as the key lookup is (see PostgresAccessStore).
  private readonly jobById;

  constructor(private readonly db: Db) {
    this.jobById = db
      .select()
      .from(jobs)
      .where(and(eq(jobs.id, placeholder("id")), eq(jobs.environmentId, placeholder("environmentId"))))
      .prepare("find_job");
  }

  find(environmentId: number, id: number, retainedSince: string): Promise<Job | undefined> {
    return answer(async () => {
      const [job] = await this.jobById.execute({ id, environmentId });
      if (!job || !isRetained(job, retainedSince)) return undefined;
      return toJob(job);
    });
  }

  list(environmentId: number, options: { status?: JobStatus; dryRun?: boolean; limit: number; after?: number; retainedSince: string }): Promise<Job[]> {
    return answer(async () =>
      (
        await this.db
          .select()
          .from(jobs)
          .where(
            and(
              eq(jobs.environmentId, environmentId),
              options.status ? eq(jobs.status, options.status) : undefined,
              options.dryRun !== undefined ? eq(jobs.dryRun, options.dryRun) : undefined,
              options.after !== undefined ? lt(jobs.id, options.after) : undefined,
              drizzleSql`(${jobs.completedAt} IS NULL OR ${jobs.completedAt} >= ${options.retainedSince})`,
            ),
          )
          .orderBy(desc(jobs.id))
          .limit(options.limit)
      ).map(toJob),
    );
  }

  rejections(jobId: number, limit: number, after?: number): Promise<RejectedRecord[]> {
    return answer(() =>
      this.db
        .select({ position: jobRejections.position, field: jobRejections.field, message: jobRejections.message, record: jobRejections.record })
        .from(jobRejections)
        .where(and(eq(jobRejections.jobId, jobId), after !== undefined ? gt(jobRejections.position, after) : undefined))
        .orderBy(asc(jobRejections.position))
        .limit(limit),
    );
  }

  countByStatus(): Promise<Array<{ status: JobStatus; count: number }>> {
    return answer(
      async () =>
        (await this.db
          .select({ status: jobs.status, count: drizzleSql<number>`count(*)::int` })
          .from(jobs)
          .groupBy(jobs.status)) as Array<{ status: JobStatus; count: number }>,
    );
  }

  queueDepth(): Promise<Array<{ environment: string; pending: number }>> {
    return answer(() =>
      this.db
        .select({ environment: environments.slug, pending: drizzleSql<number>`count(${jobs.id})::int` })
        .from(environments)
        .leftJoin(jobs, and(eq(jobs.environmentId, environments.id), eq(jobs.status, JobStatus.Pending)))
        .groupBy(environments.id)
        .orderBy(asc(environments.slug)),
    );
  }
}
