import type { ClaimedDelivery, DeliveryClaimRequest, Job, DeliveryAttempt, DeliveryOutcome, OutboxRows, WebhookDelivery, WebhookStore, WebhookSubscription } from "../ports";
import { DeliveryStatus } from "../../domain/delivery";
import { unsyncedWriteTransaction, writeTransaction, type Db } from "./database";
import { answer } from "./faults";

const now = () => new Date().toISOString();

const subscriptionColumns = `id, environment_id AS environmentId, url, events, created_at AS createdAt, disabled_at AS disabledAt, disabled_reason AS disabledReason`;
const deliveryColumns =
  `d.id, d.message_id AS messageId, d.webhook_id AS webhookId, d.environment_id AS environmentId, d.job_id AS jobId, d.event, d.url, d.status, ` +
  `d.attempts, d.created_at AS createdAt, d.next_attempt_at AS nextAttemptAt, d.completed_at AS completedAt`;

type SubscriptionRow = Omit<WebhookSubscription, "events"> & { events: string };
const toSubscription = ({ events, ...row }: SubscriptionRow): WebhookSubscription => ({ ...row, events: JSON.parse(events) as string[] });

/**
 * Webhook subscriptions and their outbox on SQLite. The outbox is written by the job queue (writeOutbox, inside its
 * transactions); deliveries are claimed and recorded by the server's dispatcher, on its own connection. One
 * process owns the database, so a claim's lease only matters across a restart, and recoverClaims ends them all.
 */
export class SqliteWebhooks implements WebhookStore {
  constructor(private readonly db: Db) {}

  private get client() {
    return this.db.$client;
  }

  /**
   * Writes the outbox rows (`rowsOf`) of jobs that just ended, inside the caller's write transaction: the delivery is
   * then as durable as the job's end. One query of the environment's subscriptions, indexed: nothing when it has none.
   */
  writeOutbox(environmentId: number, jobs: readonly Job[], rowsOf: OutboxRows): void {
    const subscriptions = this.client
      .query<SubscriptionRow, [number]>(`SELECT ${subscriptionColumns} FROM webhooks WHERE environment_id = ?1 AND disabled_at IS NULL`)
      .all(environmentId);
    if (subscriptions.length === 0) return;
    const insert = this.client.query(
      `INSERT INTO webhook_deliveries (message_id, webhook_id, environment_id, job_id, event, url, body, status, attempts, created_at, next_attempt_at)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, '${DeliveryStatus.Pending}', 0, ?8, ?8)`,
    );
    const at = now();
    for (const row of rowsOf(jobs, subscriptions.map(toSubscription))) {
      insert.run(row.messageId, row.webhookId, row.environmentId, row.jobId, row.event, row.url, row.body, at);
    }
  }

  /** Start-up: this process owns the database, so claims left by a stop (a crash, a kill) belong to nobody now. */
  recoverClaims(): void {
    this.client.query(`UPDATE webhook_deliveries SET claim_token = NULL, claimed_until = NULL WHERE claim_token IS NOT NULL`).run();
  }

  create(environmentId: number, { url, events, secret }: { url: string; events: readonly string[]; secret: string }): Promise<WebhookSubscription> {
    return answer(() =>
      writeTransaction(this.db, () =>
        toSubscription(
          this.client
            .query<SubscriptionRow, [number, string, string, string, string]>(
              `INSERT INTO webhooks (environment_id, url, events, secret, created_at) VALUES (?1, ?2, ?3, ?4, ?5) RETURNING ${subscriptionColumns}`,
            )
            .get(environmentId, url, JSON.stringify(events), secret, now())!,
        ),
      ),
    );
  }

  list(environmentId: number): Promise<WebhookSubscription[]> {
    return answer(() =>
      this.client.query<SubscriptionRow, [number]>(`SELECT ${subscriptionColumns} FROM webhooks WHERE environment_id = ?1 ORDER BY id`).all(environmentId).map(toSubscription),
    );
  }

  find(environmentId: number, id: number): Promise<(WebhookSubscription & { secret: string }) | undefined> {
    return answer(() => {
      const row = this.client
        .query<SubscriptionRow & { secret: string }, [number, number]>(`SELECT ${subscriptionColumns}, secret FROM webhooks WHERE environment_id = ?1 AND id = ?2`)
        .get(environmentId, id);
      return row ? { ...toSubscription(row), secret: row.secret } : undefined;
    });
  }

  remove(environmentId: number, id: number): Promise<boolean> {
    return answer(() =>
      writeTransaction(this.db, () => {
        const at = now();
        this.client
          .query(`UPDATE webhook_deliveries SET status = '${DeliveryStatus.Canceled}', completed_at = ?2, next_attempt_at = NULL WHERE webhook_id = ?1 AND status = '${DeliveryStatus.Pending}'`)
          .run(id, at);
        return this.client.query(`DELETE FROM webhooks WHERE environment_id = ?1 AND id = ?2`).run(environmentId, id).changes > 0;
      }),
    );
  }

  deliveriesOf(jobId: number): Promise<Array<WebhookDelivery & { history: DeliveryAttempt[] }>> {
    return answer(() => {
      const deliveries = this.client.query<WebhookDelivery, [number]>(`SELECT ${deliveryColumns} FROM webhook_deliveries d WHERE d.job_id = ?1 ORDER BY d.id`).all(jobId);
      const attempts = this.client.query<DeliveryAttempt, [number]>(
        `SELECT attempt, at, status, error, duration_ms AS durationMs FROM webhook_attempts WHERE delivery_id = ?1 ORDER BY attempt`,
      );
      return deliveries.map((delivery) => ({ ...delivery, history: attempts.all(delivery.id) }));
    });
  }

  claimDue({ token, limit, perEnvironment, leaseMs, busy }: DeliveryClaimRequest): Promise<ClaimedDelivery[]> {
    // Subscription by subscription (there are few), each with no delivery in flight here or elsewhere: its next due
    // delivery, by an index seek each. A receiver that hangs holds one delivery at a time, and its backlog is not read.
    // Then fairly between environments: each gets at most `perEnvironment` in flight (those it has count), its
    // subscriptions' deliveries earliest due first, and the environments take turns: a delivery that would be its
    // environment's nth in flight goes before any that would be another's n+1th, earliest due first among equals.
    // One environment's hanging receivers then hold a few slots, never all of them.
    const dueNow = (at: string) =>
      this.client
        .query<{ id: number }, [string, number, number]>(
          `WITH subscriptions AS (
             SELECT w.id, w.environment_id,
                    ${busy.length > 0 ? `w.id IN (${busy.map(Number).join(", ")}) OR ` : ""}EXISTS (SELECT 1 FROM webhook_deliveries o WHERE o.webhook_id = w.id AND o.status = '${DeliveryStatus.Pending}' AND o.claimed_until >= ?1) AS flying
             FROM webhooks w WHERE w.disabled_at IS NULL
           ), counted AS (
             SELECT id, environment_id, flying, sum(flying) OVER (PARTITION BY environment_id) AS flying_here FROM subscriptions
           ), due AS (
             SELECT c.environment_id, c.flying_here,
                    (SELECT d.id FROM webhook_deliveries d
                     WHERE d.webhook_id = c.id AND d.status = '${DeliveryStatus.Pending}' AND d.next_attempt_at <= ?1 AND (d.claimed_until IS NULL OR d.claimed_until < ?1)
                     ORDER BY d.next_attempt_at LIMIT 1) AS id
             FROM counted c WHERE NOT c.flying AND c.flying_here < ?3
           ), ranked AS (
             SELECT d.id, d.next_attempt_at AS due_at,
                    due.flying_here + row_number() OVER (PARTITION BY due.environment_id ORDER BY d.next_attempt_at, d.id) AS turn
             FROM due JOIN webhook_deliveries d ON d.id = due.id
           )
           SELECT id FROM ranked WHERE turn <= ?3 ORDER BY turn, due_at, id LIMIT ?2`,
        )
        .all(at, limit, perEnvironment);
    return answer(() => {
      // Looked for first without the write lock, which the queue's runs and intakes want far more often.
      if (dueNow(now()).length === 0) return [];
      // Not synced (as a run's claim is not): a claim lost in a power cut costs a delivery sent again, which at least
      // once allows; two fsyncs per delivery would cost the queue beside it.
      return unsyncedWriteTransaction(this.db, () => {
        const at = now();
        const until = new Date(Date.now() + leaseMs).toISOString();
        const due = dueNow(at);
        const claim = this.client.query(`UPDATE webhook_deliveries SET claim_token = ?1, claimed_until = ?2 WHERE id = ?3`);
        const claimed = this.client.query<ClaimedDelivery, [number]>(
          `SELECT ${deliveryColumns}, d.body, w.secret, d.claim_token AS claimToken FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE d.id = ?1`,
        );
        return due.flatMap(({ id }) => {
          claim.run(token, until, id);
          return claimed.all(id);
        });
      });
    });
  }

  recordAttempt(delivery: ClaimedDelivery, attempt: DeliveryAttempt, outcome: DeliveryOutcome): Promise<boolean> {
    // Not synced either: an attempt lost in a power cut is made again, under the same webhook-id.
    return answer(() =>
      unsyncedWriteTransaction(this.db, () => {
        const at = now();
        const settled = outcome.status === "pending" ? null : at;
        const updated = this.client
          .query(
            `UPDATE webhook_deliveries SET status = ?3, attempts = ?4, next_attempt_at = ?5, completed_at = ?6, claim_token = NULL, claimed_until = NULL
             WHERE id = ?1 AND claim_token = ?2 AND status = '${DeliveryStatus.Pending}'`,
          )
          .run(delivery.id, delivery.claimToken, outcome.status, attempt.attempt, outcome.status === "pending" ? outcome.retryAt : null, settled).changes;
        if (updated === 0) return false;
        this.client
          .query(`INSERT INTO webhook_attempts (delivery_id, attempt, at, status, error, duration_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)`)
          .run(delivery.id, attempt.attempt, attempt.at, attempt.status, attempt.error, Math.round(attempt.durationMs));
        if (outcome.status === "failed" && outcome.disable !== undefined && delivery.webhookId !== null) {
          this.client.query(`UPDATE webhooks SET disabled_at = ?2, disabled_reason = ?3 WHERE id = ?1 AND disabled_at IS NULL`).run(delivery.webhookId, at, outcome.disable);
          // Its other pending deliveries are not sent to a receiver that said it is gone.
          this.client
            .query(`UPDATE webhook_deliveries SET status = '${DeliveryStatus.Failed}', completed_at = ?2, next_attempt_at = NULL WHERE webhook_id = ?1 AND status = '${DeliveryStatus.Pending}'`)
            .run(delivery.webhookId, at);
        }
        return true;
      }),
    );
  }

  // Subscription by subscription, through the index claims use (a delivery whose subscription is gone is not pending).
  nextDueAt(): Promise<string | undefined> {
    return answer(
      () =>
        this.client
          .query<{ at: string | null }, []>(
            `SELECT min((SELECT d.next_attempt_at FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.status = '${DeliveryStatus.Pending}' ORDER BY d.next_attempt_at LIMIT 1)) AS at FROM webhooks w`,
          )
          .get()?.at ?? undefined,
    );
  }
}
