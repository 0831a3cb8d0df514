import { Elysia, t } from "elysia";
import type { OpenAPIV3 } from "openapi-types";
import type { WebhookSubscription } from "../../store/ports";
import { webhookEvents } from "../../webhooks/events";
import { retryDelaysMs } from "../../webhooks/retries";
import { pingsPerMinute } from "../../webhooks/ping-limit";
import { maxSubscriptions } from "../../webhooks/subscriptions";
import { authentication } from "../auth";
import { readBody, requireJson } from "../body";
import { bodyProblemResponses, environmentParameter, jsonBody, jsonResponse, pathParameter, problemResponses } from "../openapi";
import { notFound, validationProblem } from "../problem";
import { createdWebhookSchema, deliveryListSchema, maxUrlLength, pingResultSchema, webhookListSchema, webhookRequestSchema } from "../schemas";
import type { Services } from "../services";
import { findJobOf } from "./jobs";
import { jobIdParameter } from "./jobs.docs";

const webhookIdParameter: OpenAPIV3.ParameterObject = { name: "id", in: "path", required: true, description: "The subscription's id, as its 201 answered it.", schema: { type: "integer", minimum: 1 } };

const subscriptionNotFound = () => notFound("No webhook subscription with this id exists in this environment.");
const idOf = (text: string) => (/^[1-9][0-9]{0,9}$/.test(text) ? Number(text) : undefined);

const schedule = retryDelaysMs.map((ms) => (ms < 60_000 ? `${ms / 1000} s` : ms < 3_600_000 ? `${Math.round(ms / 60_000)} min` : `${Math.round(ms / 3_600_000)} h`)).join(", ");
const deliveryRules =
  "Events are POSTed as Standard Webhooks messages (webhook-id, webhook-timestamp, webhook-signature `v1,<HMAC-SHA256>` of `id.timestamp.body`, keyed by the subscription's secret), " +
  "with a JSON body `{type, timestamp, data}` whose data is the job document as GET /v2/status/{id} gives it. A 2xx answer within 10 s delivers; redirects are not followed; " +
  `anything else is retried with exponential backoff and jitter (about ${schedule} apart) for 24 hours, under the same webhook-id. 410 Gone disables the subscription.`;

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
      {
        parse: "none",
        params: t.Object({ env: environmentParameter }),
        detail: {
          operationId: "createWebhook",
          summary: "Subscribe to the environment's job events",
          tags: ["Webhooks"],
          description:
            "Subscribes a URL to the events of the environment's jobs: job.succeeded, job.partially_succeeded, job.failed, job.canceled (all when `events` is left out). " +
            "Answers 201 with the subscription and its signing secret, which is shown only here. The URL must be one the operator allows (--webhook-allow): " +
            "otherwise, or when its name resolves into an address the operator has not allowed, the answer is 422. " +
            deliveryRules,
          requestBody: jsonBody(webhookRequestSchema, { url: "https://hooks.example.com/importd", events: ["job.succeeded", "job.failed"] }),
          responses: {
            201: jsonResponse(
              createdWebhookSchema,
              "Subscribed. Keep the secret: it is how the receiver checks that a message is importd's.",
              { Location: { schema: { type: "string", example: "/default/v2/webhooks/1" }, description: "The subscription's URL." } },
              {
                id: 1,
                url: "https://hooks.example.com/importd",
                events: ["job.succeeded", "job.failed"],
                createdAt: "2026-11-26T10:00:00.000Z",
                disabledAt: null,
                disabledReason: null,
                secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwx5rT1p0kBkU=",
              },
            ),
            ...problemResponses(400, 401, 413, 415, 422),
            ...bodyProblemResponses(services.config),
          },
        },
      },
    )
    .get("/webhooks", async ({ environmentId }) => ({ items: (await webhooks.list(environmentId)).map(shown) }), {
      params: t.Object({ env: environmentParameter }),
      detail: {
        operationId: "listWebhooks",
        summary: "List the environment's webhook subscriptions",
        tags: ["Webhooks"],
        description: `The environment's subscriptions (at most ${maxSubscriptions}), oldest first, without their secrets. A disabled one (its receiver answered 410 Gone) says when and why.`,
        responses: {
          200: jsonResponse(webhookListSchema, "The subscriptions.", undefined, {
            items: [
              { id: 1, url: "https://hooks.example.com/importd", events: ["job.succeeded", "job.failed"], createdAt: "2026-11-26T10:00:00.000Z", disabledAt: null, disabledReason: null },
            ],
          }),
          ...problemResponses(401, 429, 503),
        },
      },
    })
    .delete(
      "/webhooks/:id",
      async ({ params, environmentId, set }) => {
        const id = idOf(params.id);
        if (id === undefined || !(await webhooks.remove(environmentId, id))) throw subscriptionNotFound();
        set.status = 204;
        return null;
      },
      {
        params: t.Object({ env: environmentParameter, id: pathParameter }),
        detail: {
          operationId: "deleteWebhook",
          summary: "Remove a webhook subscription",
          tags: ["Webhooks"],
          description: "Removes the subscription: nothing more is sent to it, and its deliveries not yet made are canceled (a job's deliveries keep their history).",
          parameters: [webhookIdParameter],
          responses: { 204: { description: "Removed." }, ...problemResponses(401, 429, 404, 503) },
        },
      },
    )
    .post(
      "/webhooks/:id/test",
      async ({ params, environmentId }) => {
        const id = idOf(params.id);
        const sent = id === undefined ? undefined : await subscriptions.ping(environmentId, id);
        if (!sent) throw subscriptionNotFound();
        return { delivered: sent.delivered, messageId: sent.messageId, status: sent.status ?? null, error: sent.error ?? null, durationMs: Math.round(sent.durationMs) };
      },
      {
        params: t.Object({ env: environmentParameter, id: pathParameter }),
        detail: {
          operationId: "testWebhook",
          summary: "Send a ping to a webhook subscription",
          tags: ["Webhooks"],
          description:
            "Sends a `ping` event to the subscription now, signed as every event is (`{type: \"ping\", timestamp, data: {webhookId, url}}`), and answers what the receiver did: " +
            "`delivered` true for a 2xx within 10 s, its status code and the time it took; never what it answered in its body. Not retried, and not stored: a way to check a receiver and its signature check. " +
            `At most ${pingsPerMinute} pings per minute per environment: beyond, 429 with Retry-After. ` +
            "A destination the operator does not allow (--webhook-allow, checked again after DNS) is not delivered, and `error` says so without what the name resolves to.",
          parameters: [webhookIdParameter],
          responses: {
            200: jsonResponse(pingResultSchema, "The attempt: delivered or not, the receiver's status code and the time it took.", undefined, {
              delivered: true,
              messageId: "msg_6f1c2d9a0b7e4c55a1e3f0d2b8c4a791",
              status: 204,
              error: null,
              durationMs: 41,
            }),
            ...problemResponses(401, 429, 404, 503),
            429: {
              ...problemResponses(429)[429]!,
              description: `Too many wrong API keys came from this address, or this environment sent ${pingsPerMinute} pings in the last minute: nothing was sent. Try again after Retry-After seconds.`,
            },
          },
        },
      },
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
      {
        params: t.Object({ env: environmentParameter, id: pathParameter }),
        detail: {
          operationId: "listJobDeliveries",
          summary: "A job's webhook deliveries",
          tags: ["Webhooks"],
          description:
            "The webhook deliveries of the job's end, one per subscription that wanted its event, each with every attempt: the receiver's status code and time, or why there was none (never its body). " +
            "Empty while the job runs, and when no subscription wanted it. " +
            deliveryRules,
          parameters: [jobIdParameter],
          responses: {
            200: jsonResponse(deliveryListSchema, "The deliveries, oldest first.", undefined, {
              items: [
                {
                  messageId: "msg_6f1c2d9a0b7e4c55a1e3f0d2b8c4a791",
                  webhookId: 1,
                  event: "job.succeeded",
                  url: "https://hooks.example.com/importd",
                  status: "delivered",
                  attempts: [
                    { attempt: 1, at: "2026-11-26T10:00:01.701Z", status: 503, error: "answered 503 Service Unavailable", durationMs: 12 },
                    { attempt: 2, at: "2026-11-26T10:00:06.930Z", status: 204, error: null, durationMs: 9 },
                  ],
                  createdAt: "2026-11-26T10:00:01.692Z",
                  nextAttemptAt: null,
                  completedAt: "2026-11-26T10:00:06.941Z",
                },
              ],
            }),
            ...problemResponses(401, 429, 404, 503),
          },
        },
      },
    );
};
