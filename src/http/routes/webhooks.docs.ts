import type { DocumentDecoration } from "elysia";
import type { OpenAPIV3 } from "openapi-types";
import { pingsPerMinute } from "../../webhooks/ping-limit";
import { retryDelaysMs } from "../../webhooks/retries";
import { maxSubscriptions } from "../../webhooks/subscriptions";
import { bodyProblemResponses, jsonBody, jsonResponse, problemResponses } from "../openapi";
import { createdWebhookSchema, deliveryListSchema, pingResultSchema, webhookListSchema, webhookRequestSchema } from "../schemas";
import { jobIdParameter } from "./jobs.docs";

// The OpenAPI descriptions of the webhook routes (webhooks.ts), kept apart from their handlers.

const webhookIdParameter: OpenAPIV3.ParameterObject = { name: "id", in: "path", required: true, description: "The subscription's id, as its 201 answered it.", schema: { type: "integer", minimum: 1 } };

const schedule = retryDelaysMs.map((ms) => (ms < 60_000 ? `${ms / 1000} s` : ms < 3_600_000 ? `${Math.round(ms / 60_000)} min` : `${Math.round(ms / 3_600_000)} h`)).join(", ");
const deliveryRules =
  "Events are POSTed as Standard Webhooks messages (webhook-id, webhook-timestamp, webhook-signature `v1,<HMAC-SHA256>` of `id.timestamp.body`, keyed by the subscription's secret), " +
  "with a JSON body `{type, timestamp, data}` whose data is the job document as GET /v2/status/{id} gives it. A 2xx answer within 10 s delivers; redirects are not followed; " +
  `anything else is retried with exponential backoff and jitter (about ${schedule} apart) for 24 hours, under the same webhook-id. 410 Gone disables the subscription.`;

/** `limits`: the server's, which the body problems of POST /v2/webhooks name. */
export const webhookDocs = (limits: Parameters<typeof bodyProblemResponses>[0]) =>
  ({
    createWebhook: {
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
        ...bodyProblemResponses(limits),
      },
    },
    listWebhooks: {
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
    deleteWebhook: {
      operationId: "deleteWebhook",
      summary: "Remove a webhook subscription",
      tags: ["Webhooks"],
      description: "Removes the subscription: nothing more is sent to it, and its deliveries not yet made are canceled (a job's deliveries keep their history).",
      parameters: [webhookIdParameter],
      responses: { 204: { description: "Removed." }, ...problemResponses(401, 429, 404, 503) },
    },
    testWebhook: {
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
    listJobDeliveries: {
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
  }) satisfies Record<string, DocumentDecoration>;
