import { JobStatus } from "../domain/job";
import type { Job } from "../store/ports";

/**
 * What importd tells a webhook subscriber (DECISIONS 10): a job's end, as Standard Webhooks messages. The body is
 * made once, when the job ends (in the same transaction), and sent the same at every attempt, under one
 * webhook-id: a receiver drops a repeat by that id.
 */

export const WebhookEvent = {
  Succeeded: "job.succeeded",
  PartiallySucceeded: "job.partially_succeeded",
  Failed: "job.failed",
  Canceled: "job.canceled",
} as const;
export type WebhookEvent = (typeof WebhookEvent)[keyof typeof WebhookEvent];
export const webhookEvents: readonly WebhookEvent[] = Object.values(WebhookEvent);

/** The event a terminal job's end is: a canceled job's is job.canceled, not job.failed. */
export function eventOf(job: Job): WebhookEvent | undefined {
  if (job.output?.canceled) return WebhookEvent.Canceled;
  if (job.status === JobStatus.Succeeded) return WebhookEvent.Succeeded;
  if (job.status === JobStatus.PartiallySucceeded) return WebhookEvent.PartiallySucceeded;
  if (job.status === JobStatus.Failed) return WebhookEvent.Failed;
  return undefined;
}

/** A message's webhook-id: unique, kept across its retries. */
export const newMessageId = () => `msg_${crypto.randomUUID().replaceAll("-", "")}`;

/** A signing secret as Standard Webhooks writes it: `whsec_` and 32 random bytes in base64. */
export const newSigningSecret = () => `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64")}`;
