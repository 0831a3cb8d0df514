import type pg from "pg";
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
import { deadlines, inTransaction, onPool, statement, Transaction, type Queryable } from "./connection";
import { answer, retried, translateFault } from "./faults";
import type { PostgresRecords } from "./records";
import { PostgresWebhooks } from "./webhooks";

const now = () => new Date().toISOString();

/** The NOTIFY channel that tells every instance that work was queued; its payload names the instance that queued it. */
export const workChannel = "importd_work";
/** NOTIFY'd after a run commits, with its job ids (comma-separated): for the long polls of every instance. */
export const doneChannel = "importd_done";

// Jobs deleted per statement by the purge, so that it never holds many locks or a long transaction.
const purgeBatch = 1_000;
// The purge's lock: one instance purges at a time.
const purgeLock = "importd purge";

const jobColumns =
  `id, environment_id AS "environmentId", type, status, record_count AS "recordCount", created_at AS "createdAt", ` +
  `started_at AS "startedAt", completed_at AS "completedAt", output, attempts, claim_token AS "claimToken", sequence, dry_run AS "dryRun", operation, sync_id AS "syncId"`;
type ClaimRow = JobRow & { claimToken: string | null; sequence: number };

const takeSequences = statement(
  `INSERT INTO job_sequences (environment_id, last_sequence) VALUES ($1, $2)
   ON CONFLICT (environment_id) DO UPDATE SET last_sequence = job_sequences.last_sequence + excluded.last_sequence
   RETURNING last_sequence AS "last"`,
);
const findIdempotencyKey = statement(`SELECT request_hash AS "requestHash", job_id AS "jobId", created_at AS "createdAt" FROM idempotency_keys WHERE environment_id = $1 AND key = $2`);
const deleteIdempotencyKey = statement(`DELETE FROM idempotency_keys WHERE environment_id = $1 AND key = $2`);
const insertIdempotencyKey = statement(`INSERT INTO idempotency_keys (environment_id, key, request_hash, job_id, created_at) VALUES ($1, $2, $3, $4, $5)`);
const insertJob = statement(
  `INSERT INTO jobs (environment_id, type, status, record_count, created_at, sequence, dry_run, operation, sync_id) VALUES ($1, $2, '${JobStatus.Pending}', $3, $4, $5, $6, $7, $8)
   RETURNING ${jobColumns}`,
);
// The body as a binary parameter (its bytes, not hex or base64), with a deadline a second longer per MB (up to 100).
const insertPayload = statement(`INSERT INTO job_payloads (job_id, body) VALUES ($1, $2)`);
const carrying = (bytes: number) => ({ query_timeout: deadlines.statementMs + bytes / 1_000 });
const queueHeads = statement(
  `SELECT DISTINCT ON (environment_id) environment_id AS "environmentId", id AS "jobId", attempts
   FROM jobs WHERE status IN ('${JobStatus.Pending}', '${JobStatus.Processing}') ORDER BY environment_id, sequence`,
);
const findJob = statement(`SELECT ${jobColumns} FROM jobs WHERE id = $1 AND environment_id = $2`);
const lockEnvironment = statement(`SELECT id FROM environments WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED`);
const releaseRun = statement(
  `UPDATE jobs SET status = '${JobStatus.Pending}', claim_token = NULL, started_at = NULL, attempts = attempts - $2
   WHERE claim_token = $1 AND status = '${JobStatus.Processing}'`,
);
const runCandidates = statement(
  `SELECT ${jobColumns} FROM jobs WHERE environment_id = $1 AND status IN ('${JobStatus.Pending}', '${JobStatus.Processing}') ORDER BY sequence LIMIT $2`,
);
const markClaimed = statement(
  `UPDATE jobs SET status = '${JobStatus.Processing}', claim_token = $1, started_at = CASE WHEN id = $2 THEN $3 ELSE NULL END, attempts = attempts + 1
   WHERE id = ANY($4::bigint[]) AND status IN ('${JobStatus.Pending}', '${JobStatus.Processing}')
   RETURNING ${jobColumns}`,
);
const payloadOf = statement(`SELECT body FROM job_payloads WHERE job_id = $1`, { bulk: true });
const heldByRun = statement(`SELECT count(*)::int AS count FROM jobs WHERE id = ANY($1::bigint[]) AND claim_token = $2 AND status = '${JobStatus.Processing}'`);
const completeJob = statement(
  `UPDATE jobs SET status = $2, output = $3, started_at = coalesce(started_at, $4), completed_at = $4, claim_token = NULL WHERE id = $1 AND claim_token = $5`,
);
const insertRejections = statement(
  `INSERT INTO job_rejections (job_id, position, field, message, record)
   SELECT $1, * FROM unnest($2::integer[], $3::text[], $4::text[], $5::text[])`,
  { bulk: true },
);
const deletePayload = statement(`DELETE FROM job_payloads WHERE job_id = $1`);
const cancelPending = statement(
  `UPDATE jobs SET status = '${JobStatus.Failed}', output = $3, completed_at = $4, claim_token = NULL
   WHERE id = $2 AND environment_id = $1 AND status = '${JobStatus.Pending}' RETURNING ${jobColumns}`,
);
const purgeIdempotencyKeys = statement(`DELETE FROM idempotency_keys WHERE created_at < $1`, { bulk: true });
// Kept as long as the jobs that deleted them (DECISIONS 13); by any instance: deleting the same rows twice is harmless.
const purgeTombstones = statement(`DELETE FROM tombstones WHERE deleted_at < $1`, { bulk: true });
// A sync that ended (completed, or expired) keeps no marks: nothing reads them again. The sync itself goes with the
// jobs of its time.
const purgeEndedMarks = statement(`DELETE FROM sync_records WHERE sync_id IN (SELECT id FROM syncs WHERE completed_at IS NOT NULL OR expires_at < $1)`, { bulk: true });
const purgeSyncs = statement(`DELETE FROM syncs WHERE coalesce(completed_at, expires_at) < $1`, { bulk: true });
const tryPurgeLock = statement(`SELECT pg_try_advisory_xact_lock(hashtext($1)) AS got`);
const notify = statement(`SELECT pg_notify($1, $2)`);
const purgeJobs = statement(`DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE completed_at < $1 LIMIT $2) RETURNING id`, { bulk: true });

/**
 * The job queue on PostgreSQL, shared by any number of importd instances.
 *
 * Order: an intake numbers its jobs from its environment's row in job_sequences, which it locks in the transaction that
 * stores them, so intakes of one environment commit in the order of their numbers, and runs take jobs by that number
 * (ids, taken before commit, are not that order).
 *
 * Runs: a run holds its environment's row (FOR NO KEY UPDATE) from the claim to the commit of its outcome, on a
 * connection of its own; another instance finds it locked and has nothing to claim. Its jobs are marked Processing and
 * their attempts counted on another connection, at once. A job the next holder of the lock finds Processing was cut
 * short: it runs again. A run whose connection was lost commits nothing: fencing by the lock.
 */
export class PostgresJobQueue implements JobQueue {
  // The open transaction of each run of this thread, by token: held from claimRun to completeRun.
  private readonly runs = new Map<string, Transaction>();
  constructor(
    private readonly pool: pg.Pool,
    private readonly records: PostgresRecords,
    // The webhook deliveries a job's end writes, in the transaction that ends it (see OutboxRows).
    private readonly outboxRows: OutboxRows,
    // A statement outside any transaction, on whichever connection of the pool is free.
    private readonly any: Queryable = onPool(pool),
    // The serving instance this queue's intakes are of (none for a CLI command's).
    private readonly instance = "",
  ) {}

  /**
   * Tells every instance's listener on `channel`; after a commit, never inside it: a listener woken before it would
   * find nothing. A lost notification is found by the listeners' periodic look (see wake-ups.ts).
   */
  private async notify(channel: string, payload = ""): Promise<void> {
    await this.any.query(notify(channel, payload)).catch(() => {});
  }

  enqueue(requests: EnqueueRequest[]): Promise<Enqueued[]> {
    return retried(async () => {
      const answers = await inTransaction(this.pool, async (tx) => {
        const next = await this.takeSequences(tx, requests);
        const answers: Enqueued[] = [];
        for (const request of requests) answers.push(await this.enqueueOne(tx, request, next));
        return answers;
      });
      if (answers.some((answer) => !answer.conflict && !answer.replayed)) await this.notify(workChannel, this.instance);
      return answers;
    });
  }

  /**
   * Locks each environment's sequence row, in ascending environment id (a fixed order, so that two intakes of the
   * same environments never deadlock), taking as many numbers as it has requests: the next number of each.
   */
  private async takeSequences(tx: Transaction, requests: EnqueueRequest[]): Promise<Map<number, number>> {
    const counts = new Map<number, number>();
    for (const { environmentId } of requests) counts.set(environmentId, (counts.get(environmentId) ?? 0) + 1);
    const next = new Map<number, number>();
    for (const environmentId of [...counts.keys()].sort((a, b) => a - b)) {
      const count = counts.get(environmentId)!;
      const [row] = await tx.query<{ last: number }>(takeSequences(environmentId, count));
      next.set(environmentId, row!.last - count + 1);
    }
    return next;
  }

  // The idempotency key is checked after the environment's lock: two instances given the same key at once take turns
  // here, and the second finds the first's job.
  private async enqueueOne(tx: Transaction, { environmentId, type, recordCount, body, idempotency, dryRun = false, operation = JobOperation.Upsert, syncId }: EnqueueRequest, next: Map<number, number>): Promise<Enqueued> {
    const sequence = next.get(environmentId)!;
    next.set(environmentId, sequence + 1);
    if (idempotency) {
      const [earlier] = await tx.query<{ requestHash: string; jobId: number; createdAt: string }>(findIdempotencyKey(environmentId, idempotency.key));
      if (earlier && earlier.createdAt >= idempotencyWindowStart()) {
        if (earlier.requestHash !== idempotency.requestHash) return { conflict: true };
        const [job] = await tx.query<ClaimRow>(findJob(earlier.jobId, environmentId));
        if (job) return { job: toJob(job), replayed: true };
      }
      if (earlier) await tx.query(deleteIdempotencyKey(environmentId, idempotency.key));
    }
    const [job] = await tx.query<ClaimRow>(insertJob(environmentId, type, recordCount, now(), sequence, dryRun, operation, syncId ?? null));
    await tx.query({ ...insertPayload(job!.id, Buffer.from(body.buffer, body.byteOffset, body.byteLength)), ...carrying(body.byteLength) });
    if (idempotency) await tx.query(insertIdempotencyKey(environmentId, idempotency.key, idempotency.requestHash, job!.id, job!.createdAt));
    return { job: toJob(job!), replayed: false };
  }

  /** Each environment's first job that is not terminal: a hint (whether another instance runs it, only a claim says). */
  heads(): Promise<QueueHead[]> {
    return answer(async () => (await this.any.query<QueueHead>(queueHeads())).sort((a, b) => a.jobId - b.jobId));
  }

  /**
   * Claims the environment's next run: takes its lock in the run's own transaction (completeRun commits it), then reads
   * its first jobs that are not terminal. One found Processing was cut short, and runs alone; a small untried first job
   * takes the small untried pending jobs after it along. `takeOver`, this process's own run cut short, lets go first.
   */
  async claimRun(request: ClaimRequest, limits: RunLimits): Promise<ClaimedRun | undefined> {
    let claimed: ClaimedRun | undefined | "again";
    while ((claimed = await this.claimOnce(request, limits)) === "again");
    return claimed;
  }

  private claimOnce(request: ClaimRequest, limits: RunLimits): Promise<ClaimedRun | undefined | "again"> {
    return retried(async () => {
      const { token, environmentId, takeOver } = request;
      const run = await Transaction.begin(this.pool);
      let claimed = false;
      try {
        if ((await run.query(lockEnvironment(environmentId))).length === 0) return undefined;
        // This process's own run, cut short, lets go of its jobs first (as on SQLite): they are claimed again below
        // like any pending job, and a storage fault's attempt is not counted against them.
        if (takeOver) await this.any.query(releaseRun(takeOver.token, takeOver.countsAsAttempt ? 0 : 1));
        const candidates = await run.query<ClaimRow>(runCandidates(environmentId, request.alone ? 1 : limits.maxJobs));
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
        // Outside the run's transaction, committed at once: pollers see Processing, and the attempt is counted even if
        // this process dies before the run commits.
        const marked = await this.any.query<ClaimRow>(markClaimed(token, first.id, now(), group.map((job) => job.id)));
        // Canceled since they were read (a cancel's row lock came first): the run goes without them, or, with none
        // left, the claim looks again.
        if (marked.length === 0) return "again" as const;
        marked.sort((a, b) => a.sequence - b.sequence);
        this.runs.set(token, run);
        claimed = true;
        return { token, environmentId, jobs: marked.map(toJob) };
      } finally {
        if (!claimed) await run.rollback();
      }
    });
  }

  payload(jobId: number): Promise<Uint8Array | undefined> {
    return answer(async () => {
      const [row] = await this.any.query<{ body: Buffer }>(payloadOf(jobId));
      return row ? new Uint8Array(row.body.buffer, row.body.byteOffset, row.body.byteLength) : undefined;
    });
  }

  async completeRun(run: ClaimedRun, apply: (records: RunRecords) => Promise<Completion[]>): Promise<void> {
    const transaction = this.runs.get(run.token);
    if (!transaction) throw new StaleClaim(`run ${run.token} is not open in this thread`);
    this.runs.delete(run.token);
    try {
      // Its own jobs only: a retry keeps its token, and takes over only the first job of the group it held.
      const ids = run.jobs.map((job) => job.id);
      const [held] = await transaction.query<{ count: number }>(heldByRun(ids, run.token));
      if (held!.count !== run.jobs.length) throw new StaleClaim(`run ${run.token} no longer holds its jobs (${ids.join(", ")})`);
      const completions = await apply(this.records.forRun(transaction, run.environmentId));
      const completedAt = now();
      for (const { jobId, status, output, rejected } of completions) {
        await transaction.query(completeJob(jobId, status, JSON.stringify(output), completedAt, run.token));
        const columns = (["position", "field", "message", "record"] as const).map((column) => rejected.map((row) => row[column]));
        if (rejected.length > 0) await transaction.query(insertRejections(jobId, ...columns));
        await transaction.query(deletePayload(jobId));
      }
      await PostgresWebhooks.writeOutbox(transaction, run.environmentId, endedJobs(run, completions, completedAt), this.outboxRows);
      await transaction.commit();
      await this.notify(doneChannel, ids.join(","));
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

  /** Nothing: a run cut short is found Processing and taken over by the next holder of its environment's lock. */
  async recoverInterrupted(): Promise<number> {
    return 0;
  }

  cancel(environmentId: number, jobId: number, output: JobOutput): Promise<{ job: Job; canceled: boolean } | undefined> {
    return retried(async () => {
      // Against a claim of the same job, the row lock decides: a claim's mark that commits first leaves it Processing
      // (and this finds it so), and one that comes after skips it (see claimRun).
      const canceled = await inTransaction(this.pool, async (tx) => {
        const [row] = await tx.query<ClaimRow>(cancelPending(environmentId, jobId, JSON.stringify(output), now()));
        if (row) {
          await tx.query(deletePayload(jobId));
          await PostgresWebhooks.writeOutbox(tx, environmentId, [toJob(row)], this.outboxRows);
        }
        return row;
      });
      if (canceled) {
        await this.notify(doneChannel, String(jobId));
        return { job: toJob(canceled), canceled: true };
      }
      const [row] = await this.any.query<ClaimRow>(findJob(jobId, environmentId));
      return row ? { job: toJob(row), canceled: false } : undefined;
    });
  }

  /**
   * One instance at a time, in batches of purgeBatch jobs, each its own transaction: a batch runs only while its
   * transaction holds the purge lock (an instance that finds it taken leaves the purge to the other).
   */
  purge(before: string): Promise<number> {
    return answer(async () => {
      await this.any.query(purgeIdempotencyKeys(idempotencyWindowStart()));
      await this.any.query(purgeTombstones(before));
      await this.any.query(purgeEndedMarks(now()));
      await this.any.query(purgeSyncs(before));
      let deleted = 0;
      for (;;) {
        const batch = await inTransaction(this.pool, async (tx) => {
          const [lock] = await tx.query<{ got: boolean }>(tryPurgeLock(purgeLock));
          if (!lock!.got) return undefined;
          return (await tx.query(purgeJobs(before, purgeBatch))).length;
        });
        if (batch === undefined) return deleted;
        deleted += batch;
        if (batch < purgeBatch) return deleted;
      }
    });
  }
}

// The list's filters are optional ($2 to $5, and $8, null: any). Not a named statement: a plan made for every filter at once
// could not use the index on status.
const listJobs = (...values: unknown[]) => ({
  text: `SELECT ${jobColumns} FROM jobs WHERE environment_id = $1 AND ($2::text IS NULL OR status = $2) AND ($3::text IS NULL OR type = $3)
    AND ($4::boolean IS NULL OR dry_run = $4) AND ($8::text IS NULL OR operation = $8) AND ($5::bigint IS NULL OR id < $5) AND (completed_at IS NULL OR completed_at >= $6) ORDER BY id DESC LIMIT $7`,
  values,
});
// A cursor may be any index the API takes (15 digits), beyond the integer column's range: compared as a bigint.
const rejectionsOf = statement(`SELECT position, field, message, record FROM job_rejections WHERE job_id = $1 AND position > $2::bigint ORDER BY position LIMIT $3`);
const jobsByStatus = statement(`SELECT status, count(*)::int AS count FROM jobs GROUP BY status`);
const queueDepths = statement(
  `SELECT environments.slug AS environment, count(jobs.id)::int AS pending FROM environments
   LEFT JOIN jobs ON jobs.environment_id = environments.id AND jobs.status = '${JobStatus.Pending}' GROUP BY environments.id ORDER BY environments.slug`,
);

/** Reads about jobs; the HTTP thread's. */
export class PostgresJobReads implements JobReads {
  constructor(private readonly database: Queryable) {}

  find(environmentId: number, id: number, retainedSince: string): Promise<Job | undefined> {
    return answer(async () => {
      const [job] = await this.database.query<ClaimRow>(findJob(id, environmentId));
      return job && isRetained(job, retainedSince) ? toJob(job) : undefined;
    });
  }

  list(environmentId: number, { status, type, dryRun, operation, limit, after, retainedSince }: JobListOptions): Promise<Job[]> {
    return answer(async () =>
      (await this.database.query<ClaimRow>(listJobs(environmentId, status ?? null, type ?? null, dryRun ?? null, after ?? null, retainedSince, limit, operation ?? null))).map(toJob),
    );
  }

  rejections(jobId: number, limit: number, after = -1): Promise<RejectedRecord[]> {
    return answer(() => this.database.query<RejectedRecord>(rejectionsOf(jobId, after, limit)));
  }

  countByStatus(): Promise<Array<{ status: JobStatus; count: number }>> {
    return answer(() => this.database.query<{ status: JobStatus; count: number }>(jobsByStatus()));
  }

  queueDepth(): Promise<Array<{ environment: string; pending: number }>> {
    return answer(() => this.database.query<{ environment: string; pending: number }>(queueDepths()));
  }
}
