import type pg from "pg";
import { DeliveryStatus } from "../../domain/delivery";
import type { ClaimedDelivery, DeliveryAttempt, DeliveryClaimRequest, DeliveryOutcome, Job, OutboxRows, WebhookDelivery, WebhookStore, WebhookSubscription } from "../ports";
import { inTransaction, statement, type Queryable } from "./connection";
import { answer, retried } from "./faults";

const now = () => new Date().toISOString();

const subscriptionColumns =
  `id, environment_id AS "environmentId", url, events, created_at AS "createdAt", disabled_at AS "disabledAt", disabled_reason AS "disabledReason"`;
const deliveryColumns =
  `d.id, d.message_id AS "messageId", d.webhook_id AS "webhookId", d.environment_id AS "environmentId", d.job_id AS "jobId", d.event, d.url, d.status, ` +
  `d.attempts, d.created_at AS "createdAt", d.next_attempt_at AS "nextAttemptAt", d.completed_at AS "completedAt"`;

type SubscriptionRow = Omit<WebhookSubscription, "events"> & { events: string };
const toSubscription = ({ events, ...row }: SubscriptionRow): WebhookSubscription => ({ ...row, events: JSON.parse(events) as string[] });

const activeSubscriptions = statement(`SELECT ${subscriptionColumns} FROM webhooks WHERE environment_id = $1 AND disabled_at IS NULL`);
// A run's outbox rows in one statement, however many jobs and subscriptions.
const insertOutbox = statement(
  `INSERT INTO webhook_deliveries (message_id, webhook_id, environment_id, job_id, event, url, body, status, attempts, created_at, next_attempt_at)
   SELECT m, w, e, j, ev, u, b, '${DeliveryStatus.Pending}', 0, $8, $8
   FROM unnest($1::text[], $2::integer[], $3::integer[], $4::bigint[], $5::text[], $6::text[], $7::text[]) AS rows (m, w, e, j, ev, u, b)`,
  { bulk: true },
);
const insertSubscription = statement(`INSERT INTO webhooks (environment_id, url, events, secret, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING ${subscriptionColumns}`);
const listSubscriptions = statement(`SELECT ${subscriptionColumns} FROM webhooks WHERE environment_id = $1 ORDER BY id`);
const findSubscription = statement(`SELECT ${subscriptionColumns}, secret FROM webhooks WHERE environment_id = $1 AND id = $2`);
const cancelPendingOf = statement(
  `UPDATE webhook_deliveries SET status = '${DeliveryStatus.Canceled}', completed_at = $2, next_attempt_at = NULL WHERE webhook_id = $1 AND status = '${DeliveryStatus.Pending}'`,
);
const deleteSubscription = statement(`DELETE FROM webhooks WHERE environment_id = $1 AND id = $2 RETURNING id`);
const deliveriesOfJob = statement(
  `SELECT ${deliveryColumns},
     CASE WHEN a.attempt IS NULL THEN NULL ELSE json_build_object('attempt', a.attempt, 'at', a.at, 'status', a.status, 'error', a.error, 'durationMs', a.duration_ms) END AS attempt
   FROM webhook_deliveries d LEFT JOIN webhook_attempts a ON a.delivery_id = d.id WHERE d.job_id = $1 ORDER BY d.id, a.attempt`,
);
// Subscription by subscription (there are few), each with none in flight: its next due delivery, by an index seek (a
// receiver that hangs holds one at a time, and its backlog is not read). Then fairly between environments, as on
// SQLite: at most $6 in flight each (its live claims, of any instance, and this instance's `busy`), by turns (an
// environment's nth in flight before another's n+1th), earliest due first within and across them. Locked so that a
// concurrent claim skips it rather than waits; claimed with this claim's token and lease in the same statement; answered
// in the order chosen. The row's own conditions are stated again where it is locked and updated: `due` was read from the statement's snapshot, and a row another instance claimed and committed
// meanwhile is locked in its new version, which only these re-check (without them, two instances claimed the same
// delivery: 5,095 sends twice in the 3-instance kill test).
const claimable = `d.status = '${DeliveryStatus.Pending}' AND d.next_attempt_at <= $1 AND (d.claimed_until IS NULL OR d.claimed_until < $1)`;
const claimDue = statement(
  `WITH subscriptions AS (
     SELECT w.id, w.environment_id,
            (w.id = ANY($4::integer[]) OR EXISTS (SELECT 1 FROM webhook_deliveries o WHERE o.webhook_id = w.id AND o.status = '${DeliveryStatus.Pending}' AND o.claimed_until >= $1)) AS flying
     FROM webhooks w WHERE w.disabled_at IS NULL
   ), counted AS MATERIALIZED (
     -- MATERIALIZED: pushed into this window, due's filter on flying_here fails to plan on PostgreSQL 15.18
     -- ("WindowFunc not found in subplan target lists").
     SELECT id, environment_id, flying, count(*) FILTER (WHERE flying) OVER (PARTITION BY environment_id) AS flying_here FROM subscriptions
   ), due AS (
     SELECT c.environment_id, c.flying_here,
            (SELECT d.id FROM webhook_deliveries d WHERE d.webhook_id = c.id AND ${claimable} ORDER BY d.next_attempt_at LIMIT 1) AS id
     FROM counted c WHERE NOT c.flying AND c.flying_here < $6
   ), ranked AS (
     SELECT d.id, d.next_attempt_at AS due_at,
            due.flying_here + row_number() OVER (PARTITION BY due.environment_id ORDER BY d.next_attempt_at, d.id) AS turn
     FROM due JOIN webhook_deliveries d ON d.id = due.id
   ), chosen AS (
     SELECT id, turn FROM ranked WHERE turn <= $6 ORDER BY turn, due_at, id LIMIT $5
   ), locked AS (
     SELECT d.id, chosen.turn FROM webhook_deliveries d JOIN chosen ON chosen.id = d.id WHERE ${claimable} FOR UPDATE OF d SKIP LOCKED
   ), claimed AS (
     UPDATE webhook_deliveries d SET claim_token = $2, claimed_until = $3 FROM locked, webhooks w
     WHERE d.id = locked.id AND w.id = d.webhook_id AND ${claimable}
     RETURNING ${deliveryColumns}, d.body, w.secret, d.claim_token AS "claimToken", locked.turn
   )
   SELECT * FROM claimed ORDER BY turn, "nextAttemptAt", id`,
);
// Claims one at a time across instances: each then counts the claims the others committed before it. Without it, two
// instances looking at once chose the same deliveries, and the second, skipping the first's locked rows, claimed
// fewer than the environments' shares (or, with different `busy` lists, could give one more than its share). A
// claim is one short statement; the lock is held until its commit.
const oneClaimAtATime = statement(`SELECT pg_advisory_xact_lock(hashtext('importd webhook claims'))`);
const settleDelivery = statement(
  `UPDATE webhook_deliveries SET status = $3, attempts = $4, next_attempt_at = $5, completed_at = $6, claim_token = NULL, claimed_until = NULL
   WHERE id = $1 AND claim_token = $2 AND status = '${DeliveryStatus.Pending}' RETURNING id`,
);
const insertAttempt = statement(`INSERT INTO webhook_attempts (delivery_id, attempt, at, status, error, duration_ms) VALUES ($1, $2, $3, $4, $5, $6)`);
const disableSubscription = statement(`UPDATE webhooks SET disabled_at = $2, disabled_reason = $3 WHERE id = $1 AND disabled_at IS NULL`);
const failPendingOf = statement(
  `UPDATE webhook_deliveries SET status = '${DeliveryStatus.Failed}', completed_at = $2, next_attempt_at = NULL WHERE webhook_id = $1 AND status = '${DeliveryStatus.Pending}'`,
);
// Subscription by subscription, through the index claims use (a delivery whose subscription is gone is not pending).
const asynchronousCommit = statement(`SET LOCAL synchronous_commit = off`);
const nextDue = statement(
  `SELECT min((SELECT d.next_attempt_at FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.status = '${DeliveryStatus.Pending}' ORDER BY d.next_attempt_at LIMIT 1)) AS at FROM webhooks w`,
);

/**
 * Webhook subscriptions and their outbox on PostgreSQL, shared by every instance: any of them claims a due delivery
 * (its lease keeps the others off it; FOR UPDATE SKIP LOCKED keeps two claims from waiting on each other).
 */
export class PostgresWebhooks implements WebhookStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly any: Queryable,
  ) {}

  /** Writes the outbox rows (`rowsOf`) of jobs that just ended, in the transaction that ends them (`tx`). */
  static async writeOutbox(tx: Queryable, environmentId: number, jobs: readonly Job[], rowsOf: OutboxRows): Promise<void> {
    const subscriptions = (await tx.query<SubscriptionRow>(activeSubscriptions(environmentId))).map(toSubscription);
    if (subscriptions.length === 0) return;
    const rows = rowsOf(jobs, subscriptions);
    if (rows.length === 0) return;
    const column = <K extends keyof (typeof rows)[number]>(key: K) => rows.map((row) => row[key]);
    await tx.query(insertOutbox(column("messageId"), column("webhookId"), column("environmentId"), column("jobId"), column("event"), column("url"), column("body"), now()));
  }

  create(environmentId: number, { url, events, secret }: { url: string; events: readonly string[]; secret: string }): Promise<WebhookSubscription> {
    return retried(async () => toSubscription((await this.any.query<SubscriptionRow>(insertSubscription(environmentId, url, JSON.stringify(events), secret, now())))[0]!));
  }

  list(environmentId: number): Promise<WebhookSubscription[]> {
    return answer(async () => (await this.any.query<SubscriptionRow>(listSubscriptions(environmentId))).map(toSubscription));
  }

  find(environmentId: number, id: number): Promise<(WebhookSubscription & { secret: string }) | undefined> {
    return answer(async () => {
      const [row] = await this.any.query<SubscriptionRow & { secret: string }>(findSubscription(environmentId, id));
      return row ? { ...toSubscription(row), secret: row.secret } : undefined;
    });
  }

  remove(environmentId: number, id: number): Promise<boolean> {
    return retried(() =>
      inTransaction(this.pool, async (tx) => {
        await tx.query(cancelPendingOf(id, now()));
        return (await tx.query(deleteSubscription(environmentId, id))).length > 0;
      }),
    );
  }

  // One statement, so one snapshot: a delivery and its attempts as one commit left them (an attempt stored with its
  // outcome is never listed beside the delivery's state before it).
  deliveriesOf(jobId: number): Promise<Array<WebhookDelivery & { history: DeliveryAttempt[] }>> {
    return answer(async () => {
      const rows = await this.any.query<WebhookDelivery & { attempt: DeliveryAttempt | null }>(deliveriesOfJob(jobId));
      const deliveries = new Map<number, WebhookDelivery & { history: DeliveryAttempt[] }>();
      for (const { attempt, ...delivery } of rows) {
        const id = Number(delivery.id);
        if (!deliveries.has(id)) deliveries.set(id, { ...delivery, id, history: [] });
        if (attempt) deliveries.get(id)!.history.push(attempt);
      }
      return [...deliveries.values()];
    });
  }

  // A claim and an attempt's record commit without waiting for the WAL's flush (synchronous_commit off, for their own
  // transactions): one lost in a crash of the database costs a delivery sent again, which at least once allows.
  claimDue({ token, limit, perEnvironment, leaseMs, busy }: DeliveryClaimRequest): Promise<ClaimedDelivery[]> {
    return retried(() =>
      inTransaction(this.pool, async (tx) => {
        await tx.query(asynchronousCommit());
        await tx.query(oneClaimAtATime());
        const rows = await tx.query<ClaimedDelivery & { turn: string }>(claimDue(now(), token, new Date(Date.now() + leaseMs).toISOString(), busy, limit, perEnvironment));
        return rows.map(({ turn: _, ...row }) => ({ ...row, id: Number(row.id) }));
      }),
    );
  }

  recordAttempt(delivery: ClaimedDelivery, attempt: DeliveryAttempt, outcome: DeliveryOutcome): Promise<boolean> {
    return retried(() =>
      inTransaction(this.pool, async (tx) => {
        await tx.query(asynchronousCommit());
        const at = now();
        const settled = await tx.query(
          settleDelivery(delivery.id, delivery.claimToken, outcome.status, attempt.attempt, outcome.status === "pending" ? outcome.retryAt : null, outcome.status === "pending" ? null : at),
        );
        if (settled.length === 0) return false;
        await tx.query(insertAttempt(delivery.id, attempt.attempt, attempt.at, attempt.status, attempt.error, Math.round(attempt.durationMs)));
        if (outcome.status === "failed" && outcome.disable !== undefined && delivery.webhookId !== null) {
          await tx.query(disableSubscription(delivery.webhookId, at, outcome.disable));
          await tx.query(failPendingOf(delivery.webhookId, at));
        }
        return true;
      }),
    );
  }

  nextDueAt(): Promise<string | undefined> {
    return answer(async () => (await this.any.query<{ at: string | null }>(nextDue()))[0]?.at ?? undefined);
  }
}
