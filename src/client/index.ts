import type { Static } from "@sinclair/typebox";
import type { JobDocument } from "../jobs/document";
import type { createdWebhookSchema, deliverySchema, pingResultSchema, syncSchema, tombstonePageSchema, webhookSchema } from "../http/schemas";
import type { assetRecord } from "../resources/assets";
import type { referenceRecord } from "../resources/reference-data";
import { certificateProblem, isCertificateError } from "./tls";

/**
 * A typed client for importd, for programs and for `importd import`. Its types are the server's own
 * schemas (imported as types only, so the client carries none of the server). It retries network errors
 * and 5xx answers with backoff and jitter, never a 4xx; it honours Retry-After; and it sends an
 * Idempotency-Key with every import and deletion, so that a retried POST can never queue a second job.
 */

export type { JobDocument };
export type RecordTypes = {
  assets: Static<typeof assetRecord>;
  subareas: Static<typeof referenceRecord>;
  assettypes: Static<typeof referenceRecord>;
  assetcategories: Static<typeof referenceRecord>;
};
export type Resource = keyof RecordTypes;
export type StoredRecord<R extends Resource> = RecordTypes[R] & { updatedAt: string; lastJobId: number };
export type RejectedRecord = { index: number; id: string | null; field: string; message: string; record: Record<string, unknown> };
export type Page<T> = { items: T[]; nextCursor: string | null };
export type Webhook = Static<typeof webhookSchema>;
export type CreatedWebhook = Static<typeof createdWebhookSchema>;
export type WebhookDelivery = Static<typeof deliverySchema>;
export type WebhookPing = Static<typeof pingResultSchema>;
/** A page of deleted records, in the order they were deleted; keep `resumeCursor` to ask later for the deletions since. */
export type DeletionPage = Static<typeof tombstonePageSchema>;
export type Tombstone = DeletionPage["items"][number];
/** A sync (a mirror of a resource in the making, DECISIONS 13): its state, its jobs, its last completion. */
export type Sync = Static<typeof syncSchema>;
/**
 * A sync's completion: a dry run (deletes nothing, leaves the sync open), and how much it may delete, as a share of
 * the resource's records (0 to 100, importd's default 10) or a count; not both.
 */
export type CompleteSyncOptions = RequestOptions & { dryRun?: boolean; maxDeletePercent?: number; maxDelete?: number };

/** An answer of importd that is an error: its Problem Details, `errors` included (`[index].field` → messages). */
export class ImportdProblem extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    readonly detail: string | undefined,
    readonly errors: Record<string, string[]> | undefined,
    readonly type: string | undefined,
    /** Retry-After, in seconds, when the answer said how long to wait (a 429, a 503). */
    readonly retryAfterSeconds?: number,
  ) {
    super(`${status} ${title}${detail ? `: ${detail}` : ""}`);
    this.name = "ImportdProblem";
  }

  static async from(response: Response): Promise<ImportdProblem> {
    const text = await response.text();
    const wait = retryAfterMs(response);
    const retryAfterSeconds = wait === undefined ? undefined : wait / 1000;
    try {
      const body = JSON.parse(text) as { title?: string; detail?: string; errors?: Record<string, string[]>; type?: string };
      return new ImportdProblem(response.status, body.title ?? response.statusText, body.detail, body.errors, body.type, retryAfterSeconds);
    } catch {
      return new ImportdProblem(response.status, response.statusText, text.slice(0, 500) || undefined, undefined, undefined, retryAfterSeconds);
    }
  }
}

/** importd could not be reached (after the retries). */
export class ImportdConnectionError extends Error {
  override name = "ImportdConnectionError";
}

/** importd's TLS certificate was refused: untrusted, expired, or not for the name used (never retried). */
export class ImportdCertificateError extends ImportdConnectionError {
  override name = "ImportdCertificateError";
}

/**
 * A failure that interrupts rather than ends: importd could not be reached, or still answered 5xx (stopping, its
 * storage failing) or 429 after the retries. The same request can succeed later, so an import keeps its progress.
 */
export const isTransient = (error: unknown) => error instanceof ImportdConnectionError || (error instanceof ImportdProblem && (error.status >= 500 || error.status === 429));

/** What went wrong with the connection, in words, rather than the runtime's own sentence about it. */
function connectionProblem(error: unknown): string {
  const code = (error as { code?: string })?.code ?? "";
  const message = (error as Error)?.message ?? String(error);
  if (code === "ECONNREFUSED" || code === "ConnectionRefused") return "the connection was refused, nothing listens there";
  if (code === "ECONNRESET" || code === "ConnectionClosed" || /socket connection was closed/i.test(message)) return "the connection was closed before an answer came";
  if (code === "ETIMEDOUT" || code === "Timeout" || /timed? ?out/i.test(message)) return "the connection timed out";
  if (code === "ENOTFOUND") return "the host name was not found";
  if (code === "EPROTO") return "the TLS handshake failed: the server does not speak HTTPS on this port (use http://)";
  return message.replace(/\s*Is the computer able to access the url\?/, "").trim() || code || "unknown network error";
}

export type ClientOptions = {
  /** The environment's base URL, e.g. http://appliance:8080/default */
  baseUrl: string;
  apiKey: string;
  /** Attempts after the first, for network errors and 5xx (default 5). */
  retries?: number;
  /** First backoff in ms (default 250); it doubles each attempt, up to 10 s, with full jitter. */
  backoffMs?: number;
  /**
   * Certificates to trust for HTTPS (PEM), instead of the system's: the server's own (a certificate importd made), or
   * the authority that signed it.
   */
  ca?: string;
};

type RequestOptions = { signal?: AbortSignal };
/** `sync`: the id of an open sync of the resource, which the import joins (?sync=); not for a deletion. */
export type ImportOptions = RequestOptions & { idempotencyKey?: string; dryRun?: boolean; sync?: number };
/** A queued job, and whether importd answered it from an earlier request with the same Idempotency-Key. */
export type Queued = { job: JobDocument; replayed: boolean };
export type WaitOptions = RequestOptions & { onProgress?: (job: JobDocument) => void; timeoutMs?: number };

const terminal = new Set(["Succeeded", "PartiallySucceeded", "Failed"]);
const maxBackoffMs = 10_000;

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

const retryAfterMs = (response: Response) => {
  const seconds = Number(response.headers.get("retry-after"));
  return Number.isFinite(seconds) && seconds >= 0 && response.headers.has("retry-after") ? seconds * 1000 : undefined;
};

// How long one poll of waitForJob may be held: short enough that onProgress still hears of a long job now and then.
const longPollSeconds = 10;

export function createClient(options: ClientOptions) {
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const retries = options.retries ?? 5;
  const backoffMs = options.backoffMs ?? 250;
  const backoff = (attempt: number) => Math.random() * Math.min(maxBackoffMs, backoffMs * 2 ** attempt);

  /** One request, retried on network errors and 5xx; any other non-2xx is thrown as an ImportdProblem. */
  async function send(path: string, init: RequestInit & RequestOptions = {}): Promise<Response> {
    const started = Date.now();
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await fetch(`${baseUrl}${path}`, { ...init, headers: { "api-key": options.apiKey, ...init.headers }, ...(options.ca ? { tls: { ca: options.ca } } : {}) });
      } catch (error) {
        if (init.signal?.aborted) throw init.signal.reason;
        // Refused certificates stay refused: said at once, never retried, never ignored.
        if (isCertificateError(error)) throw new ImportdCertificateError(`cannot reach importd at ${baseUrl}: ${await certificateProblem(baseUrl, error)}`, { cause: error });
        if (attempt >= retries) {
          const seconds = Math.round((Date.now() - started) / 1000);
          throw new ImportdConnectionError(`cannot reach importd at ${baseUrl}: ${connectionProblem(error)} (${attempt + 1} attempts in ${seconds} s)`, { cause: error });
        }
        await sleep(backoff(attempt), init.signal);
        continue;
      }
      if (response.status >= 500 && attempt < retries) {
        await response.arrayBuffer().catch(() => undefined);
        await sleep(retryAfterMs(response) ?? backoff(attempt), init.signal);
        continue;
      }
      if (!response.ok) throw await ImportdProblem.from(response);
      return response;
    }
  }

  const getJson = async <T>(path: string, options: RequestOptions = {}) => (await (await send(path, { signal: options.signal })).json()) as T;
  const query = (params: Record<string, string | number | boolean | undefined>) => {
    const entries = Object.entries(params).filter(([, value]) => value !== undefined) as Array<[string, string | number | boolean]>;
    return entries.length ? `?${new URLSearchParams(entries.map(([key, value]) => [key, String(value)]))}` : "";
  };

  /** POSTs a batch (records, or ids) with its Idempotency-Key; answers the 202's job. */
  async function queue(path: string, body: string | Uint8Array, options: ImportOptions): Promise<Queued> {
    const response = await send(`${path}${query({ sync: options.sync, dryRun: options.dryRun || undefined })}`, {
      method: "POST",
      body: body as BodyInit,
      headers: { "content-type": "application/json", "idempotency-key": options.idempotencyKey ?? crypto.randomUUID() },
      signal: options.signal,
    });
    return { job: (await response.json()) as JobDocument, replayed: response.headers.get("idempotent-replayed") === "true" };
  }

  const client = {
    /** Queues the records as one job; answers the job (the same one again for a repeated idempotency key). */
    async importRecords<R extends Resource>(resource: R, records: ReadonlyArray<RecordTypes[R]> | string | Uint8Array, options: ImportOptions = {}): Promise<JobDocument> {
      return (await client.queueImport(resource, records, options)).job;
    },

    /** As importRecords, and says whether the job was queued by an earlier request with the same key (`Idempotent-Replayed`). */
    async queueImport<R extends Resource>(resource: R, records: ReadonlyArray<RecordTypes[R]> | string | Uint8Array, options: ImportOptions = {}): Promise<Queued> {
      return queue(`/v2/${resource}`, typeof records === "string" || records instanceof Uint8Array ? records : JSON.stringify(records), options);
    },

    /**
     * Queues the deletion of these ids as one delete job (DECISIONS 13); answers the job, whose output, once it has
     * finished, counts deleted, notFound (not an error) and rejected (still referred to by another record).
     */
    async deleteRecords(resource: Resource, ids: readonly string[] | string | Uint8Array, options: ImportOptions = {}): Promise<JobDocument> {
      return (await client.queueDeletion(resource, ids, options)).job;
    },

    /** As deleteRecords, and says whether the job was queued by an earlier request with the same key. */
    async queueDeletion(resource: Resource, ids: readonly string[] | string | Uint8Array, options: ImportOptions = {}): Promise<Queued> {
      return queue(`/v2/deletions/${resource}`, typeof ids === "string" || ids instanceof Uint8Array ? ids : JSON.stringify(ids), options);
    },

    /** Opens a sync of the resource (a mirror): imports join it with the `sync` option, then completeSync ends it. */
    openSync: async (resource: Resource, options: RequestOptions = {}) =>
      (await (await send(`/v2/syncs`, { method: "POST", body: JSON.stringify({ resource }), headers: { "content-type": "application/json" }, signal: options.signal })).json()) as Sync,

    getSync: (id: number, options?: RequestOptions) => getJson<Sync>(`/v2/syncs/${id}`, options),

    /**
     * Queues the sync's completion, in order after its imports; answers its job (operation "syncCompletion"), whose
     * output, once it has finished, says how many records it considered (`total`), deleted and rejected (still
     * referred to). A guard (too many to delete, a job of the sync that failed as a whole, the sync expired) fails it
     * with nothing deleted and a message saying how to allow it. A dry run deletes nothing and leaves the sync open.
     */
    completeSync: async (id: number, options: CompleteSyncOptions = {}) => {
      const params = query({ dryRun: options.dryRun || undefined, maxDeletePercent: options.maxDeletePercent, maxDelete: options.maxDelete });
      return (await (await send(`/v2/syncs/${id}/complete${params}`, { method: "POST", signal: options.signal })).json()) as JobDocument;
    },

    /** A page of the resource's deleted records, in the order they were deleted (`after`: a nextCursor or resumeCursor). */
    listDeletions: (resource: Resource, params: { limit?: number; after?: string } = {}, options?: RequestOptions) =>
      getJson<DeletionPage>(`/v2/deletions/${resource}${query(params)}`, options),

    getJob: (id: number, options?: RequestOptions) => getJson<JobDocument>(`/v2/status/${id}`, options),

    /**
     * Polls until the job is terminal. Each poll is a long poll (`Prefer: wait`), so the answer comes as soon as
     * the job ends; a server that does not hold polls is asked again as its Retry-After says.
     */
    async waitForJob(id: number, options: WaitOptions = {}): Promise<JobDocument> {
      const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
      for (;;) {
        const wait = Math.max(0, Math.min(longPollSeconds, Math.floor((deadline - Date.now()) / 1000)));
        const response = await send(`/v2/status/${id}`, { signal: options.signal, headers: { prefer: `wait=${wait}` } });
        const job = (await response.json()) as JobDocument;
        options.onProgress?.(job);
        if (terminal.has(job.importJobStatus)) return job;
        if (Date.now() > deadline) throw new Error(`job ${id} is still ${job.importJobStatus} after ${options.timeoutMs} ms`);
        if (!response.headers.has("preference-applied") || wait === 0) await sleep(retryAfterMs(response) ?? 1000, options.signal);
      }
    },

    /**
     * Cancels a Pending job: answers it Failed, `output.canceled` true, nothing applied (the same again for a job
     * already canceled). A job that is Processing or finished is an ImportdProblem with status 409.
     */
    /**
     * Every record of the resource from one snapshot, in id order (GET /v2/exports/<resource>): the answer, whose body
     * streams NDJSON (each line a record with updatedAt and lastJobId) or, with format "csv", CSV in the layout
     * `importd import` reads. A body cut short (a fault on the server, the connection lost) makes its reader throw.
     */
    exportRecords: (resource: Resource, options: RequestOptions & { format?: "ndjson" | "csv"; updatedSince?: string } = {}) =>
      send(`/v2/exports/${resource}${query({ updatedSince: options.updatedSince })}`, {
        headers: { accept: options.format === "csv" ? "text/csv" : "application/x-ndjson" },
        signal: options.signal,
      }),
    cancelJob: async (id: number, options: RequestOptions = {}) =>
      (await (await send(`/v2/status/${id}/cancel`, { method: "POST", signal: options.signal })).json()) as JobDocument,

    /** A page of the records a finished job rejected, in their batch's order. */
    listRejected: (id: number, params: { limit?: number; after?: string } = {}, options?: RequestOptions) =>
      getJson<Page<RejectedRecord>>(`/v2/status/${id}/rejected${query(params)}`, options),

    /** Every record a finished job rejected, page after page. */
    async *rejectedRecords(id: number, options: RequestOptions = {}): AsyncGenerator<RejectedRecord> {
      let after: string | undefined;
      do {
        const page = await client.listRejected(id, { limit: 1000, after }, options);
        yield* page.items;
        after = page.nextCursor ?? undefined;
      } while (after !== undefined);
    },

    /**
     * A page of the environment's jobs, newest first; `type` is an importJobType, `dryRun` false lists real imports
     * only, `operation` "delete" the delete jobs only ("upsert": the imports).
     */
    listJobs: (params: { status?: string; type?: string; operation?: string; dryRun?: boolean; limit?: number; after?: string } = {}, options?: RequestOptions) =>
      getJson<Page<JobDocument>>(`/v2/jobs${query(params)}`, options),

    /** Subscribes `url` to the environment's job events (all, unless `events` says which); answers it with its secret, shown once. */
    createWebhook: async (url: string, events?: readonly string[], options: RequestOptions = {}) =>
      (await (await send(`/v2/webhooks`, { method: "POST", body: JSON.stringify({ url, events }), headers: { "content-type": "application/json" }, signal: options.signal })).json()) as CreatedWebhook,

    listWebhooks: async (options?: RequestOptions) => (await getJson<{ items: Webhook[] }>(`/v2/webhooks`, options)).items,

    removeWebhook: async (id: number, options: RequestOptions = {}) => void (await send(`/v2/webhooks/${id}`, { method: "DELETE", signal: options.signal })),

    /** Sends a ping to the subscription now: what its receiver answered. */
    testWebhook: async (id: number, options: RequestOptions = {}) => (await (await send(`/v2/webhooks/${id}/test`, { method: "POST", signal: options.signal })).json()) as WebhookPing,

    /** The webhook deliveries of a job's end, each with its attempts. */
    jobDeliveries: async (id: number, options?: RequestOptions) => (await getJson<{ items: WebhookDelivery[] }>(`/v2/status/${id}/deliveries`, options)).items,

    getRecord: <R extends Resource>(resource: R, id: string, options?: RequestOptions) =>
      getJson<StoredRecord<R>>(`/v2/${resource}/${encodeURIComponent(id)}`, options),

    listRecords: <R extends Resource>(resource: R, params: { limit?: number; after?: string } = {}, options?: RequestOptions) =>
      getJson<Page<StoredRecord<R>>>(`/v2/${resource}${query(params)}`, options),
  };
  return client;
}

export type ImportdClient = ReturnType<typeof createClient>;
