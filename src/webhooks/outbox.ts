import { jobDocument } from "../jobs/document";
import type { Job, OutboxRow } from "../store/ports";
import { eventOf, newMessageId, type WebhookEvent } from "./events";

// What is sent: the bodies of events and pings, and the outbox rows a job's end writes (see events.ts for the events).

/** The body: the event type, when it happened, and the job document as GET /v2/status/{id} gives it. */
export const eventBody = (event: WebhookEvent, job: Job) => JSON.stringify({ type: event, timestamp: job.completedAt, data: jobDocument(job) });

/** A `ping` (POST /v2/webhooks/{id}/test): the subscription it tests. */
export const pingBody = (webhook: { id: number; url: string }, at: Date) => JSON.stringify({ type: "ping", timestamp: at.toISOString(), data: { webhookId: webhook.id, url: webhook.url } });

/**
 * The outbox rows for jobs that just ended: one per job and subscription that wants its event (a subscription
 * disabled by a 410 wants none). `subscriptions` are the environment's, read in the transaction that ends them. Every
 * store is opened with this (see OutboxRows in store/ports.ts), which calls it in that transaction.
 */
export function outboxRows(jobs: readonly Job[], subscriptions: ReadonlyArray<{ id: number; url: string; events: readonly string[] }>): OutboxRow[] {
  const rows: OutboxRow[] = [];
  for (const job of jobs) {
    const event = eventOf(job);
    if (!event) continue;
    let body: string | undefined;
    for (const subscription of subscriptions) {
      if (!subscription.events.includes(event)) continue;
      body ??= eventBody(event, job);
      rows.push({ messageId: newMessageId(), webhookId: subscription.id, environmentId: job.environmentId, jobId: job.id, event, url: subscription.url, body });
    }
  }
  return rows;
}
