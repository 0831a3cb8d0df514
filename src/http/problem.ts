import type { FieldErrors } from "../resources/validate";
import { StorageError, StorageFull } from "../store/errors";
import { PingsExhausted, SubscriptionRefused } from "../webhooks/subscriptions";
import { WorkerCrashed } from "../worker/pool";

/**
 * Every error answer is an RFC 9457 Problem Details document, built here and nowhere else.
 * `type` points at the RFC 9110 section of the status, as the spec's 400 example does.
 */

const typeByStatus: Record<number, string> = {
  400: "https://tools.ietf.org/html/rfc9110#section-15.5.1",
  401: "https://tools.ietf.org/html/rfc9110#section-15.5.2",
  404: "https://tools.ietf.org/html/rfc9110#section-15.5.5",
  405: "https://tools.ietf.org/html/rfc9110#section-15.5.6",
  408: "https://tools.ietf.org/html/rfc9110#section-15.5.9",
  409: "https://tools.ietf.org/html/rfc9110#section-15.5.10",
  413: "https://tools.ietf.org/html/rfc9110#section-15.5.14",
  415: "https://tools.ietf.org/html/rfc9110#section-15.5.16",
  422: "https://tools.ietf.org/html/rfc9110#section-15.5.21",
  429: "https://tools.ietf.org/html/rfc6585#section-4",
  500: "https://tools.ietf.org/html/rfc9110#section-15.6.1",
  503: "https://tools.ietf.org/html/rfc9110#section-15.6.4",
  507: "https://tools.ietf.org/html/rfc4918#section-11.5",
};

export type ProblemBody = {
  type: string;
  title: string;
  status: number;
  detail?: string;
  errors?: FieldErrors;
  /** RFC 9457 extension members: more about this problem, for programs (a deleted record's deletedByJobId, say). */
  [member: string]: unknown;
};

export class Problem extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    readonly detail?: string,
    readonly errors?: FieldErrors,
    readonly headers: Record<string, string> = {},
    readonly members: Record<string, unknown> = {},
  ) {
    super(detail ?? title);
  }

  body(): ProblemBody {
    const body: ProblemBody = { type: typeByStatus[this.status] ?? "about:blank", title: this.title, status: this.status };
    if (this.detail !== undefined) body.detail = this.detail;
    if (this.errors !== undefined) body.errors = this.errors;
    return { ...body, ...this.members };
  }

  toResponse(): Response {
    return new Response(JSON.stringify(this.body()), {
      status: this.status,
      headers: { "content-type": "application/problem+json", ...this.headers },
    });
  }
}

export const validationProblem = (errors: FieldErrors, detail?: string) =>
  new Problem(400, "One or more validation errors occurred.", detail, errors);

// One answer for every authentication failure: which part was wrong is never told.
// RFC 9110 requires a 401 to name the scheme it wants; ours is the key in the Api-Key header.
export const unauthorized = () =>
  new Problem(401, "Unauthorized", "Send a valid API key for this environment in the Api-Key header, in the form <secret>_<keyId>.", undefined, {
    "www-authenticate": 'Api-Key header="Api-Key"',
  });

export const tooManyFailedAttempts = (retryAfterSeconds: number) =>
  new Problem(
    429,
    "Too Many Requests",
    `Too many requests with a wrong API key came from this address; none is checked for ${retryAfterSeconds} seconds. Fix the key, then try again after that.`,
    undefined,
    { "retry-after": String(retryAfterSeconds) },
  );

export const tooManyPings = (pingsPerMinute: number, retryAfterSeconds: number) =>
  new Problem(
    429,
    "Too Many Requests",
    `This environment sent ${pingsPerMinute} test pings in the last minute, the most it may. Try again in ${retryAfterSeconds} seconds; the deliveries of jobs' events are not limited by this.`,
    undefined,
    { "retry-after": String(retryAfterSeconds) },
  );

export const idempotencyKeyReused = () =>
  new Problem(
    422,
    "Unprocessable Content",
    "This Idempotency-Key was used in the last 24 hours for a different request (another body or resource). Send a new key for a new request, or the same request with this key.",
  );

export const conflict = (detail: string, headers: Record<string, string> = {}) => new Problem(409, "Conflict", detail, undefined, headers);

export const notFound = (
  detail = "There is nothing at this address. Every API path is under an environment's base URL, /<environment>/v2/… (for example GET /default/v2/jobs); /swagger lists them all.",
) => new Problem(404, "Not Found", detail);

/** A record that was deleted: who deleted it and when, in words and as members (DECISIONS 13). */
export const deletedRecord = (noun: string, id: string, tombstone: { deletedByJobId: number; deletedAt: string }) =>
  new Problem(404, "Not Found", `The ${noun} '${id}' was deleted by job ${tombstone.deletedByJobId} at ${tombstone.deletedAt}.`, undefined, {}, {
    deletedByJobId: tombstone.deletedByJobId,
    deletedAt: tombstone.deletedAt,
  });

export const methodNotAllowed = (method: string, allowed: string[]) =>
  new Problem(405, "Method Not Allowed", `${method.slice(0, 20)} is not an operation of this path, which answers ${allowed.join(", ")}. /swagger lists every operation.`, undefined, {
    allow: allowed.join(", "),
  });

export const payloadTooLarge = (maxBytes: number) =>
  new Problem(413, "Payload Too Large", `The request body is larger than the limit of ${maxBytes} bytes. Split the records into several requests (under 8 MB each is recommended).`);

export const unsupportedMediaType = (received: string | null) =>
  new Problem(415, "Unsupported Media Type", `Send the records as JSON with the header Content-Type: application/json${received ? ` (received '${received.slice(0, 100)}')` : " (the header was missing)"}.`);

export const serviceUnavailable = (detail: string, retryAfterSeconds = 5) =>
  new Problem(503, "Service Unavailable", detail, undefined, { "retry-after": String(retryAfterSeconds) });

// Cut off while its body arrives (too slowly, or not at all): the connection is closed after the answer (Bun does
// so when told), rather than left to Bun's idle timeout.
const closeAfter = { connection: "close" };

// Refused before the body was read (429, 503), the connection is left open on purpose: Bun then reads the rest of
// the body and drops it, holding none of it, so that a client still sending its body (as most do before they read
// an answer) gets the answer, where a close would reset the connection under it and lose it. Retry-After 5: uploads
// in flight are answered within seconds, or cut off (408) within the stall time.

/** The server's budget of request bodies in memory is spent (uploads.ts). */
export const serverBusy = (detail: string) => new Problem(503, "Service Unavailable", detail, undefined, { "retry-after": "5" });

/** This environment has as many request bodies in flight as it may (uploads.ts). */
export const environmentBusy = (detail: string) => new Problem(429, "Too Many Requests", detail, undefined, { "retry-after": "5" });

/** A body that stopped arriving, or arrives far too slowly (uploads.ts, watchBody; body.ts for one read in one go). */
/** `late`: a body read in one go, which had not all arrived by its deadline (`lateAfterSeconds`, body.ts). */
export const bodyTimeout = (limits: { stallSeconds: number; minBytesPerSecond: number }, why: "stalled" | "crawling" | "late", lateAfterSeconds = 0) =>
  new Problem(
    408,
    "Request Timeout",
    (why === "stalled"
      ? `No byte of the request body arrived for ${limits.stallSeconds} seconds`
      : why === "crawling"
        ? `The request body arrived at under ${limits.minBytesPerSecond} bytes a second, the least the server waits for`
        : `The request body had not all arrived after ${Math.ceil(lateAfterSeconds)} seconds, the most the server waits for a body of its length`) +
      "; nothing was accepted. Send the request again (over a faster connection, or in smaller requests).",
    undefined,
    closeAfter,
  );

export const insufficientStorage = () =>
  new Problem(507, "Insufficient Storage", "The server has no room to store this; nothing was accepted or changed. Try again later or ask the operator to free disk space.", undefined, { "retry-after": "60" });

export const internalError = () =>
  new Problem(500, "Internal Server Error", "Something went wrong on the server. The error was logged; try again.");

/**
 * Where a storage fault becomes an HTTP answer: a full disk is 507, any other fault (and a worker thread that
 * died with the request's work) 503 with Retry-After. Neither changed anything, so the client can send the
 * same request again. Undefined for any other error.
 */
export function storageProblem(error: unknown): Problem | undefined {
  if (error instanceof StorageFull) return insufficientStorage();
  if (error instanceof StorageError || error instanceof WorkerCrashed) {
    return serviceUnavailable("The server could not use its storage just now; nothing was accepted or changed. Send the request again.");
  }
  return undefined;
}

/** Where a webhook subscription's rules become an HTTP answer (webhooks/subscriptions.ts). Undefined for any other error. */
export function webhookProblem(error: unknown): Problem | undefined {
  if (error instanceof SubscriptionRefused) return new Problem(422, "Unprocessable Content", error.message, { [error.field]: [error.message] });
  if (error instanceof PingsExhausted) return tooManyPings(error.pingsPerMinute, error.retryAfterSeconds);
  return undefined;
}
