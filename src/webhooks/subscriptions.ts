import type { Log } from "../log";
import type { WebhookStore, WebhookSubscription } from "../store/ports";
import { resolveDestination, type AllowList } from "./destinations";
import { newMessageId, newSigningSecret } from "./events";
import { pingBody } from "./outbox";
import { PingLimit, pingsPerMinute } from "./ping-limit";
import { sendWebhook } from "./send";

/** Subscriptions per environment: each ended job is written to the outbox once per subscription. */
export const maxSubscriptions = 100;

/**
 * A subscription the rules refuse: `field` is what it is about (`url`, or `$` for the request as a whole), the message
 * why, in words for the key holder (never what a name resolved to: that is the operator's, and logged).
 */
export class SubscriptionRefused extends Error {
  override name = "SubscriptionRefused";
  constructor(
    readonly field: "url" | "$",
    message: string,
  ) {
    super(message);
  }
}

/** The environment sent as many pings as it may this minute: nothing was sent. */
export class PingsExhausted extends Error {
  override name = "PingsExhausted";
  constructor(
    readonly pingsPerMinute: number,
    readonly retryAfterSeconds: number,
  ) {
    super(`${pingsPerMinute} pings in the last minute`);
  }
}

export type PingResult = { delivered: boolean; messageId: string; status?: number; error?: string; durationMs: number };

/**
 * Webhook subscriptions, from the key holder's side (DECISIONS 10, 15): what may be subscribed (an absolute URL to a
 * destination the operator allows, checked with DNS as a delivery would be; at most `maxSubscriptions` per
 * environment), each with a signing secret made here and shown once; and pings, sent at once, a few a minute.
 */
export class WebhookSubscriptions {
  private readonly pings = new PingLimit();

  constructor(private readonly deps: { store: WebhookStore; allow: AllowList; log: Log }) {}

  /** Subscribes `url` to `events` in the environment. Answers the subscription and its secret; a SubscriptionRefused otherwise. */
  async subscribe(environmentId: number, wanted: { url: string; events: readonly string[] }): Promise<{ subscription: WebhookSubscription; secret: string }> {
    let url: URL;
    try {
      url = new URL(wanted.url);
    } catch {
      throw new SubscriptionRefused("url", `${wanted.url.slice(0, 100)} is not a URL: give an absolute http or https URL.`);
    }
    // Where it points is checked now, its name resolved as each delivery will: a URL into the appliance's network is
    // refused here, not only at delivery.
    const destination = await resolveDestination(url, this.deps.allow);
    if (!destination.ok) {
      // What the name resolved to is the operator's to know, not the key holder's (destinations.ts, Refusal).
      if (destination.resolved !== undefined) this.deps.log({ level: "warn", msg: "webhook subscription refused", environmentId, origin: url.origin, resolved: destination.resolved });
      throw new SubscriptionRefused("url", destination.reason);
    }
    if ((await this.deps.store.list(environmentId)).length >= maxSubscriptions) {
      throw new SubscriptionRefused("$", `The environment has ${maxSubscriptions} webhook subscriptions, the most it may have: remove one first (DELETE /v2/webhooks/{id}).`);
    }
    const secret = newSigningSecret();
    const subscription = await this.deps.store.create(environmentId, { url: url.href, events: wanted.events, secret });
    return { subscription, secret };
  }

  /**
   * Sends a ping to the environment's subscription `id` now, signed as every event is, and answers what the receiver
   * did; undefined when the environment has no such subscription, a PingsExhausted past the limit. Not retried, not stored.
   */
  async ping(environmentId: number, id: number): Promise<PingResult | undefined> {
    const subscription = await this.deps.store.find(environmentId, id);
    if (!subscription) return undefined;
    const waitSeconds = this.pings.take(environmentId);
    if (waitSeconds !== undefined) throw new PingsExhausted(pingsPerMinute, waitSeconds);
    const messageId = newMessageId();
    const sent = await sendWebhook({ url: subscription.url, messageId, body: pingBody(subscription, new Date()), secret: subscription.secret, allow: this.deps.allow });
    if (sent.resolved !== undefined) {
      this.deps.log({ level: "warn", msg: "webhook ping refused", environmentId, webhookId: subscription.id, origin: new URL(subscription.url).origin, resolved: sent.resolved });
    }
    return { delivered: sent.delivered, messageId, status: sent.status, error: sent.error, durationMs: sent.durationMs };
  }
}
