import { Elysia, t } from "elysia";
import type { WebhookSubscription } from "../../store/ports";
import { webhookEvents } from "../../webhooks/events";
import { authentication } from "../auth";
import { readBody, requireJson } from "../body";
import { environmentParameter, pathParameter } from "../openapi";
import { notFound, validationProblem } from "../problem";
import { maxUrlLength } from "../schemas";
import type { Services } from "../services";
import { findJobOf } from "./jobs";
import { webhookDocs } from "./webhooks.docs";

const subscriptionNotFound = () => notFound("No webhook subscription with this id exists in this environment.");
const idOf = (text: string) => (/^[1-9][0-9]{0,9}$/.test(text) ? Number(text) : undefined);

/** The body of POST /v2/webhooks, checked field by field (400); where it points is the service's to judge (422). */
function readSubscription(body: Uint8Array): { url: string; events: string[] } {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(body));
  } catch {
    throw validationProblem({ $: ["The body is not valid JSON. Send an object such as {\"url\": \"https://hooks.example.com/importd\"}."] });
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw validationProblem({ $: ["The body must be a JSON object with a url, and optionally events."] });
  const { url, events = [...webhookEvents] } = value as { url?: unknown; events?: unknown };
  const errors: Record<string, string[]> = {};
  if (typeof url !== "string" || url.trim() === "") errors.url = ["'Url' must be a non-empty string: where events are POSTed."];
  else if (url.includes("\u0000")) errors.url = ["'Url' must not hold the NUL character (\\u0000)."];
  // In characters, as the schema's maxLength counts them (an emoji is one), not UTF-16 units.
  else if (url.length > maxUrlLength && [...url].length > maxUrlLength) errors.url = [`'Url' must be ${maxUrlLength} characters or fewer.`];
  if (!Array.isArray(events) || events.length === 0 || events.some((event) => !webhookEvents.includes(event as never)) || new Set(events).size !== events.length) {
    errors.events = [`'Events' must be a list of distinct events, each one of: ${webhookEvents.join(", ")}; leave it out for all of them.`];
  }
  if (Object.keys(errors).length > 0) throw validationProblem(errors);
  return { url: url as string, events: events as string[] };
}

const shown = (subscription: WebhookSubscription) => {
  const { environmentId: _, ...rest } = subscription;
  return rest;
};

/** Webhook subscriptions (DECISIONS 10) and a job's deliveries. */
export const webhookRoutes = (services: Services) => {
  const findJob = findJobOf(services);
  const { webhooks, subscriptions } = services;
  const docs = webhookDocs(services.config);
  return new Elysia()
    .use(authentication(services))
    .post(
      "/webhooks",
      async ({ request, environmentId, params, set }) => {
        requireJson(request.headers.get("content-type"));
        // In the environment's share of the budget, as every body: small, but a few thousand of them stalled would not be.
        const upload = services.uploads.begin(environmentId);
        let wanted: { url: string; events: string[] };
        try {
          wanted = readSubscription(await readBody(request, 64 * 1024, upload));
        } finally {
          upload.end();
        }
        const { subscription, secret } = await subscriptions.subscribe(environmentId, wanted);
        set.status = 201;
        set.headers.location = `/${params.env}/v2/webhooks/${subscription.id}`;
        return { ...shown(subscription), secret };
      },
      { parse: "none", params: t.Object({ env: environmentParameter }), detail: docs.createWebhook },
    )
    .get("/webhooks", async ({ environmentId }) => ({ items: (await webhooks.list(environmentId)).map(shown) }), {
      params: t.Object({ env: environmentParameter }),
      detail: docs.listWebhooks,
    })
    .delete(
      "/webhooks/:id",
      async ({ params, environmentId, set }) => {
        const id = idOf(params.id);
        if (id === undefined || !(await webhooks.remove(environmentId, id))) throw subscriptionNotFound();
        set.status = 204;
        return null;
      },
      { params: t.Object({ env: environmentParameter, id: pathParameter }), detail: docs.deleteWebhook },
    )
    .post(
      "/webhooks/:id/test",
      async ({ params, environmentId }) => {
        const id = idOf(params.id);
        const sent = id === undefined ? undefined : await subscriptions.ping(environmentId, id);
        if (!sent) throw subscriptionNotFound();
        return { delivered: sent.delivered, messageId: sent.messageId, status: sent.status ?? null, error: sent.error ?? null, durationMs: Math.round(sent.durationMs) };
      },
      { params: t.Object({ env: environmentParameter, id: pathParameter }), detail: docs.testWebhook },
    )
    .get(
      "/status/:id/deliveries",
      async ({ params, environmentId }) => {
        const job = await findJob(environmentId, params.id);
        const deliveries = await webhooks.deliveriesOf(job.id);
        return {
          items: deliveries.map(({ history, messageId, webhookId, event, url, status, createdAt, nextAttemptAt, completedAt }) => ({
            messageId,
            webhookId,
            event,
            url,
            status,
            attempts: history.map((attempt) => ({ ...attempt, durationMs: Math.round(attempt.durationMs) })),
            createdAt,
            nextAttemptAt,
            completedAt,
          })),
        };
      },
      { params: t.Object({ env: environmentParameter, id: pathParameter }), detail: docs.listJobDeliveries },
    );
};
