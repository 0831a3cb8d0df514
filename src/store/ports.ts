/**
 * The store's ports: what the rest of importd asks of its storage, one small interface per concern, in the
 * domain's own types. Every method returns a Promise, even over a synchronous driver, so that a second
 * backend (PostgreSQL) is an addition: a folder under store/ that passes tests/store/contract.ts.
 *
 * The queue's rules live behind JobQueue, not in a process's memory: which run is next (an environment's
 * oldest pending job), one run per environment at a time, claiming with a token that completing checks,
 * and attempts, counted when a run is claimed.
 *
 * Storage faults reach the rest of importd as the named errors of store/errors.ts, never as a driver's codes.
 */
import type { JobOperation, JobOutput, JobStatus } from "../domain/job";
import type { ResourceDefinition } from "../resources/definition";

export type Job = {
  id: number;
  environmentId: number;
  /** The resource's job type, e.g. "Asset". */
  type: string;
  status: JobStatus;
  recordCount: number;
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
  /** Null until the job is terminal. */
  output: JobOutput | null;
  /** Runs started on the job, the one that holds it now included. */
  attempts: number;
  /** A dry run: applied, then rolled back; only its outcome is kept. */
  dryRun: boolean;
  /** What it does to the records its batch names: upsert them (an import) or delete them by id; or a sync's completion. */
  operation: JobOperation;
  /** The sync it belongs to (an import that joined it, or its completion); null for most jobs. */
  syncId: number | null;
};

export type Environment = { id: number; slug: string; createdAt: string };

export type Idempotency = { key: string; requestHash: string };
/** `body`: the payload as it is to be stored (see jobs/payload.ts). */
export type EnqueueRequest = { environmentId: number; type: string; recordCount: number; body: Uint8Array; idempotency?: Idempotency; dryRun?: boolean; operation?: JobOperation; syncId?: number };
export type Enqueued = { job: Job; replayed: boolean; conflict?: undefined } | { conflict: true };

/** One record a finished job rejected, as kept for GET /status/{id}/rejected. `record`: its JSON as sent. */
export type RejectedRecord = { position: number; field: string; message: string; record: string };

/** How many jobs a run may take along: see jobs/apply.ts. */
export type RunLimits = { maxJobs: number; maxRecords: number };

export type ClaimRequest = {
  /** The new run's token, unique (a UUID): completing the run must present it. */
  token: string;
  /** Claim the run of this environment if it has one to claim (nothing otherwise). */
  environmentId: number;
  /**
   * A run of this process that was cut short (its worker thread died, a storage fault): its jobs are taken
   * over rather than left Processing. `countsAsAttempt`: false when the run met a storage fault, which is
   * not the jobs' doing, so its attempt is not counted.
   */
  takeOver?: { token: string; countsAsAttempt: boolean };
  /** Only the first job, however small. */
  alone?: boolean;
};

/**
 * A run: an environment's oldest pending job and, when it is small and has never been tried, the small
 * pending jobs queued right after it, claimed together (Processing, attempts counted, `token` set). A dry run
 * runs alone.
 */
export type ClaimedRun = { token: string; environmentId: number; jobs: Job[] };

/** What one job of a run ended as: stored by completeRun. */
export type Completion = { jobId: number; status: JobStatus; output: JobOutput; rejected: RejectedRecord[] };

/** The oldest pending job of an environment that has no run in progress: the head of its queue. */
export type QueueHead = { environmentId: number; jobId: number; attempts: number };

/** What a deleted record left: its id, when and by which job, and its place in the order deletions happened. */
export type Tombstone = { id: string; deletedAt: string; deletedByJobId: number; position: number };

/** How many records of a resource name an id in one of their fields, and one of them (the least id). */
export type Referrers = { count: number; example: string };

/** What an upsert did, record by record. */
export type UpsertCounts = { created: number; updated: number; unchanged: number };

/**
 * A sync (DECISIONS 13's mirror), as stored. `resource` is the resource's path. `openedAfterSequence`: the environment's
 * last job sequence when it opened; a job numbered after it that is not of the sync wrote after the opening.
 */
export type Sync = {
  id: number;
  environmentId: number;
  resource: string;
  createdAt: string;
  expiresAt: string;
  openedAfterSequence: number;
  completedAt: string | null;
  completedByJobId: number | null;
  recordsSent: number | null;
  /** The sequence through which a completion told of the sync's jobs that failed as a whole (jobs/syncs.ts). */
  failuresToldThrough: number | null;
};

/** A job of a sync, in the sync's order (`sequence`: its place in the environment's). */
export type SyncJob = Pick<Job, "id" | "operation" | "status" | "dryRun" | "output" | "completedAt" | "recordCount"> & { sequence: number };

/** A sync as GET /v2/syncs/{id} shows it: its row, its jobs in order, and the ids they sent so far. */
export type SyncView = Sync & { jobs: SyncJob[]; recordsMarked: number };

/** What a sync's completion reads and writes of its sync, inside its run's transaction. */
export interface RunSyncs {
  /** The environment's sync, as the run's transaction sees it. */
  find(syncId: number): Promise<Sync | undefined>;
  /** The sync's jobs before `beforeJobId` in the environment's order (the completion's own excluded). */
  jobs(syncId: number, beforeJobId: number): Promise<SyncJob[]>;
  /**
   * Notes that the sync's jobs sent `ids` (once each, however often sent). `dryRun`: sent by a dry run, which only a
   * dry-run completion counts as sent; a real mark replaces a dry one, never the reverse.
   */
  mark(syncId: number, ids: readonly string[], options?: { dryRun?: boolean }): Promise<void>;
  /**
   * The ids of `resource`'s records in the environment that no job of the sync sent and that no job outside the sync
   * numbered after its opening wrote last, in id order; and how many records the resource has in all. `dryRun`: for a
   * dry-run completion, which counts what the sync's dry runs sent as sent too.
   */
  unsent(resource: ResourceDefinition, sync: Sync, options?: { dryRun?: boolean }): Promise<{ ids: string[]; records: number }>;
  /** Ends the sync as completed by `jobId`: its marks are dropped, their count kept. */
  complete(syncId: number, jobId: number, completedAt: string): Promise<void>;
  /** Drops the marks of a sync that expired. */
  dropMarks(syncId: number): Promise<void>;
  /** Notes that a completion told of the sync's jobs that failed as a whole, through the job numbered `sequence`. */
  tellFailures(syncId: number, sequence: number): Promise<void>;
}

/** One resource's records of one environment, read and written inside a run's transaction. */
export interface RunRecords {
  /**
   * Which of `ids` exist as records of `resource` in the environment, as the run's transaction sees it. Asked with
   * the ids a batch refers to, so that its cost follows the batch, not the size of the table referred to.
   */
  existing(resource: ResourceDefinition, ids: readonly string[]): Promise<Set<string>>;
  /**
   * Upserts the records by id, as written by `jobId`, and says what that did to each: created, updated, or
   * unchanged (equal to the stored record in every field its resource defines; not written at all, so its
   * updatedAt and lastJobId stay as they were). The records are as validation gives them: their text is
   * well-formed (no lone surrogate) and holds no U+0000.
   */
  upsert(resource: ResourceDefinition, jobId: number, records: ReadonlyArray<{ id: string } & Record<string, unknown>>): Promise<UpsertCounts>;
  /**
   * For each of `ids`, the records of `referring` whose `field` names it: how many, and one of them; an id none names is
   * absent. One grouped query, whose cost follows the ids (it may scan the environment's records of `referring`: no
   * index is kept for it, which every import would pay for).
   */
  referrers(referring: ResourceDefinition, field: string, ids: readonly string[]): Promise<Map<string, Referrers>>;
  /**
   * Deletes the records of `ids` that exist, as `jobId` does, and leaves a tombstone for each, in the order of `ids`;
   * resolves to the ids deleted, in that order. An id repeated in `ids` is deleted once. (An upsert of an id ends its
   * tombstone.)
   */
  remove(resource: ResourceDefinition, jobId: number, ids: readonly string[]): Promise<string[]>;
  /** Runs `fn` and then undoes every write it made (a savepoint rolled back): a dry run's apply. */
  undone<T>(fn: () => Promise<T>): Promise<T>;
  /** The environment's syncs: marks written by their jobs, and their completions. */
  readonly syncs: RunSyncs;
}

/** The job queue: every write about jobs. */
export interface JobQueue {
  /**
   * Stores each job with its payload, in one transaction; once this resolves, they survive a crash.
   * Answers in the order asked. Jobs of one environment are numbered in the order they commit.
   * With an idempotency key: the same key and request within 24 hours answer the job stored then
   * (`replayed`, also for a repeat within this call), the same key with another request is a conflict,
   * and an older key is used afresh.
   */
  enqueue(requests: EnqueueRequest[]): Promise<Enqueued[]>;
  /**
   * The head of every environment's queue that could be claimed now, oldest first: a hint for the scheduler.
   * On a store shared by several processes it may include environments whose run another process has in
   * progress: only the claim can tell (and answers undefined).
   */
  heads(): Promise<QueueHead[]>;
  /**
   * Claims the next run of an environment: its oldest pending job, unless a run of the environment is in
   * progress (then undefined). The jobs become Processing with the run's token; their attempts are counted.
   */
  claimRun(request: ClaimRequest, limits: RunLimits): Promise<ClaimedRun | undefined>;
  /** The job's stored payload; undefined once the job is terminal (or if it was lost). */
  payload(jobId: number): Promise<Uint8Array | undefined>;
  /**
   * Completes a run in one transaction: `apply` writes the records through the handle it is given and
   * answers each job's completion; the jobs are stored terminal and their payloads dropped. Rejects with
   * StaleClaim, writing nothing, if the run no longer holds its jobs (another run took them over).
   */
  completeRun(run: ClaimedRun, apply: (records: RunRecords) => Promise<Completion[]>): Promise<void>;
  /**
   * A claimed run that will not be completed (reading its batches failed): lets go of what its claim holds
   * (on PostgreSQL, the run's open transaction and its environment's lock). Its jobs stay Processing, to be
   * taken over by the next claim. Does nothing once the run is completed.
   */
  abandonRun(run: ClaimedRun): Promise<void>;
  /**
   * Start-up recovery of runs cut short by a stop: on a store that one process owns (SQLite), every
   * Processing job goes back to Pending, keeping its attempts. Resolves to how many. A store shared by
   * several processes takes interrupted runs over when claiming instead, and recovers nothing here.
   */
  recoverInterrupted(): Promise<number>;
  /**
   * Ends the environment's job `jobId` as `output` says (Failed, canceled) if it is still Pending, dropping its
   * payload; resolves to the job as it then is, and whether this call canceled it (undefined for no such job).
   * A claim and a cancel of the same job never both succeed: whichever commits first wins.
   */
  cancel(environmentId: number, jobId: number, output: JobOutput): Promise<{ job: Job; canceled: boolean } | undefined>;
  /**
   * Deletes job documents completed before `before`, the tombstones of deletions before it, the syncs that ended
   * (completed or expired) before it, the marks of syncs that expired, and idempotency keys past their 24 hours;
   * resolves to the jobs deleted.
   */
  purge(before: string): Promise<number>;
}

/** A page of an environment's jobs: each filter, when given, narrows it (`type` is a resource's job type, e.g. "Asset"). */
export type JobListOptions = { status?: JobStatus; type?: string; dryRun?: boolean; operation?: JobOperation; limit: number; after?: number; retainedSince: string };

/** Reads about jobs, for the HTTP API and the metrics. */
export interface JobReads {
  /** The environment's job, or undefined for an unknown id, another environment's job or one past retention. */
  find(environmentId: number, id: number, retainedSince: string): Promise<Job | undefined>;
  /** Newest first; `after` is the id of the last job of the previous page. */
  list(environmentId: number, options: JobListOptions): Promise<Job[]>;
  /** The job's rejected records in batch order, after the index `after`. */
  rejections(jobId: number, limit: number, after?: number): Promise<RejectedRecord[]>;
  /** Jobs by status, all environments together. */
  countByStatus(): Promise<Array<{ status: JobStatus; count: number }>>;
  /** Pending jobs of every environment, 0 included. */
  queueDepth(): Promise<Array<{ environment: string; pending: number }>>;
}

/** Reads of imported records, in their wire shape plus updatedAt and lastJobId. */
export interface RecordReads {
  get(resource: ResourceDefinition, environmentId: number, id: string): Promise<Record<string, unknown> | undefined>;
  /** A page in id order; `after` is the last id of the previous page. */
  page(resource: ResourceDefinition, environmentId: number, limit: number, after?: string): Promise<Array<Record<string, unknown>>>;
  /** The tombstone of the record `id`, if it was deleted (and not imported again since, nor purged). */
  tombstone(resource: ResourceDefinition, environmentId: number, id: string): Promise<Tombstone | undefined>;
  /** A page of the resource's tombstones in the order the deletions happened; `after` is the last position of the previous page. */
  tombstones(resource: ResourceDefinition, environmentId: number, limit: number, after?: number): Promise<Tombstone[]>;
}

/** `updatedSince`: only the records written at or after it (an ISO timestamp as toISOString writes it). */
export type SnapshotOptions = { updatedSince?: string };

/**
 * A resource's records in one environment as of one moment (an export, DECISIONS 14), in id order, as
 * GET /v2/<resource>/{id} gives each: what was committed when it opened, nothing written since. It holds a read
 * transaction on a connection of its own (never one the other reads use, which would then see the snapshot too): close
 * it. Opened by store/open.ts's openSnapshot, in an export's thread.
 */
export interface RecordSnapshot {
  /**
   * The records of the next `limit` ids after the last slice's, those updatedSince leaves out left out (so a slice may
   * be empty before the end); undefined once every record was read. Each slice costs about `limit` rows, whatever
   * the filter: a reader on a shared thread can bound its turns.
   */
  next(limit: number): Promise<Array<Record<string, unknown>> | undefined>;
  /** Ends the snapshot's transaction and lets go of its connection; once, however often asked. */
  close(): Promise<void>;
}

/** Syncs outside runs: opened by the HTTP API, and read by it. */
export interface SyncStore {
  /**
   * Opens a sync of `resource` (its path) in the environment, now, expiring `lifetimeMs` later, after the environment's
   * jobs numbered so far.
   */
  open(environmentId: number, resource: string, lifetimeMs: number): Promise<Sync>;
  /** The environment's sync, or undefined (an unknown id, another environment's, or one purged). */
  find(environmentId: number, id: number): Promise<Sync | undefined>;
  /** The environment's sync with its jobs and its marks counted. */
  view(environmentId: number, id: number): Promise<SyncView | undefined>;
}

export type StoredKey = { keyId: number; environmentId: number; slug: string; secretHash: Uint8Array; revokedAt: string | null };
export type KeyListing = { keyId: number; createdAt: string; revokedAt: string | null };

/** Environments and API keys, as stored. The rules (slugs, key format, hashing) are in access/. */
export interface AccessStore {
  /** Undefined when the slug is taken. */
  insertEnvironment(slug: string): Promise<Environment | undefined>;
  /** On a store with no environment: creates one and its first key together (`secretHash`); otherwise undefined. */
  insertFirstEnvironment(slug: string, secretHash: Uint8Array): Promise<{ environment: Environment; keyId: number } | undefined>;
  listEnvironments(): Promise<Environment[]>;
  findEnvironment(slug: string): Promise<Environment | undefined>;
  insertKey(environmentId: number, secretHash: Uint8Array): Promise<number>;
  listKeys(environmentId: number): Promise<KeyListing[]>;
  /** "revoked", or why not. */
  revokeKey(keyId: number): Promise<"revoked" | "already revoked" | "unknown">;
  findKey(keyId: number): Promise<StoredKey | undefined>;
}

/** An environment's webhook subscription (DECISIONS 10); its signing secret only where it is needed. */
export type WebhookSubscription = {
  id: number;
  environmentId: number;
  url: string;
  events: string[];
  createdAt: string;
  /** Set when its receiver answered 410 Gone: nothing more is sent to it. */
  disabledAt: string | null;
  disabledReason: string | null;
};

/**
 * One attempt to deliver: the receiver's status, or why there was no answer. Not its body: shown to the subscriber,
 * it would make importd a way to read what services the operator allowed answer (DECISIONS 15).
 */
export type DeliveryAttempt = { attempt: number; at: string; status: number | null; error: string | null; durationMs: number };

/** One event for one subscription, from the outbox. `status`: a DeliveryStatus (domain/delivery.ts). */
export type WebhookDelivery = {
  id: number;
  messageId: string;
  webhookId: number | null;
  environmentId: number;
  jobId: number;
  event: string;
  url: string;
  status: string;
  attempts: number;
  createdAt: string;
  nextAttemptAt: string | null;
  completedAt: string | null;
};

/** A delivery claimed for an attempt: its body and its subscription's secret, and the claim's token. */
export type ClaimedDelivery = WebhookDelivery & { body: string; secret: string; claimToken: string };

/** What the dispatcher asks claimDue for (see WebhookStore.claimDue). */
export type DeliveryClaimRequest = { token: string; limit: number; perEnvironment: number; leaseMs: number; busy: readonly number[] };

/** What an attempt leaves the delivery as: delivered, to be tried again at `retryAt`, or given up (`failed`); `disable` the subscription (410). */
export type DeliveryOutcome = { status: "delivered" } | { status: "pending"; retryAt: string } | { status: "failed"; disable?: string };

/** One delivery the end of a job makes: its event, for one subscription, with the body sent at every attempt. */
export type OutboxRow = { messageId: string; webhookId: number; environmentId: number; jobId: number; event: string; url: string; body: string };

/**
 * What the end of jobs writes to the webhook outbox: a row per job and subscription that wants its event, given the
 * environment's subscriptions (those a 410 disabled left out). Made above the store (webhooks/outbox.ts, which knows
 * the events and their bodies) and handed to it when it is opened; the job queue calls it in the transaction that
 * makes the jobs terminal (completeRun, cancel), with the subscriptions as that transaction reads them, and writes
 * the rows there: a delivery is as durable as the job's end.
 */
export type OutboxRows = (jobs: readonly Job[], subscriptions: ReadonlyArray<{ id: number; url: string; events: readonly string[] }>) => OutboxRow[];

/**
 * Webhook subscriptions and their outbox. The outbox is written by the job queue itself, in the transaction that
 * makes a job terminal (completeRun, cancel); deliveries are claimed as runs are, with a token and a lease, so
 * that any process may send them and none sends one twice at once.
 */
export interface WebhookStore {
  create(environmentId: number, subscription: { url: string; events: readonly string[]; secret: string }): Promise<WebhookSubscription>;
  list(environmentId: number): Promise<WebhookSubscription[]>;
  find(environmentId: number, id: number): Promise<(WebhookSubscription & { secret: string }) | undefined>;
  /** Deletes the subscription and cancels its deliveries still pending; false when the environment has no such one. */
  remove(environmentId: number, id: number): Promise<boolean>;
  /** A job's deliveries, oldest first, each with its attempts. */
  deliveriesOf(jobId: number): Promise<Array<WebhookDelivery & { history: DeliveryAttempt[] }>>;
  /**
   * Claims up to `limit` deliveries that are due (pending, their time come, not claimed or their lease past), at most
   * one per subscription and none of the subscriptions in `busy`, for `leaseMs`: no other claim takes them meanwhile.
   * Fair between environments: none has more than `perEnvironment` in flight (its claims still held, by any process,
   * and its subscriptions in `busy`), and the environments take turns, earliest due first within and across them.
   */
  claimDue(request: DeliveryClaimRequest): Promise<ClaimedDelivery[]>;
  /** Stores an attempt and what it leaves the delivery as, if the claim still holds it (false otherwise: another took it over). */
  recordAttempt(delivery: ClaimedDelivery, attempt: DeliveryAttempt, outcome: DeliveryOutcome): Promise<boolean>;
  /** When the next pending delivery is due, if any: how long the dispatcher may sleep. */
  nextDueAt(): Promise<string | undefined>;
}

/** How long a failed authentication counts against its client (access/failure-limiter.ts): a sliding minute. */
export const failureWindowMs = 60_000;

/**
 * Where failed authentications are counted, by client (access/failure-limiter.ts's failureKey): in this process's
 * memory (MemoryFailureLog) where it alone serves the store, in the store where several instances share it. A log
 * may forget a failure once it is older than failureWindowMs.
 */
export interface FailureLog {
  /** No failure within the last minute anywhere: nobody needs to be looked up (a hint; false when unsure). */
  readonly empty: boolean;
  /** The times (ms since the epoch) of the client's newest failures after `since`, at most `limit`, oldest first. */
  recent(client: string, since: number, limit: number): Promise<number[]>;
  add(client: string, at: number): Promise<void>;
}

/** A moment in a store's history, from CommitWatch.mark. */
export type CommitMark = unknown;

/**
 * Tells cheaply whether anything was written to the store since a mark, by any of importd's processes: what
 * lets memory answer a read while the database has not changed (see read-cache.ts). False when unsure.
 */
export interface CommitWatch {
  mark(): CommitMark;
  unchangedSince(mark: CommitMark): boolean;
}

/**
 * An instance of a shared store found stalled (silent for `silentMs`), whose `connections` were ended; `address`
 * is where they came from, as the database saw it (none over a Unix socket).
 */
export type StalledInstance = { instance: string; address: string | null; silentMs: number; connections: number };

/** What Store.watch tells of. */
export type StoreEvents = {
  work(): void;
  jobsFinished(jobIds: number[]): void;
  missed(): void;
  /** Another instance was found stalled, and its connections ended: its runs will be taken over. */
  stalled(instance: StalledInstance): void;
  /** Something went wrong looking after the other instances (the store goes on). */
  problem(message: string, error: unknown): void;
};

/** How a worker thread opens the store its process uses: structured-cloneable, opaque outside store/. */
export type StoreHandle = { backend: string };

/** A whole store, as the server builds it and hands it down. */
export interface Store {
  readonly queue: JobQueue;
  readonly jobs: JobReads;
  readonly records: RecordReads;
  readonly syncs: SyncStore;
  readonly access: AccessStore;
  readonly webhooks: WebhookStore;
  /**
   * Where failed authentications are counted on a store several processes share, so that the limit holds
   * across them; absent where one process owns the store (it counts them in memory).
   */
  readonly failures?: FailureLog;
  /**
   * Whether the store takes one write at a time, from whichever thread (SQLite): then one worker thread does the
   * small jobs' work (WorkerPool's light lane), since more would only take turns.
   */
  readonly writesOneAtATime: boolean;
  /**
   * Work the store has left for the thread that ran a task (SQLite: folding the WAL into the database file after a
   * big run), to be done once the task's answer has gone; undefined when there is none. Taking it clears it.
   */
  takeUpkeep?(): (() => void) | undefined;
  /** Where the store can tell cheaply that nothing changed (SQLite: its count of write transactions); absent elsewhere, and then nothing is cached. */
  readonly commits?: CommitWatch;
  /**
   * For /readyz: whether the store answers, and is migrated; on a store shared by several processes, also
   * whether wake-ups from the others reach this one (`wakeUps`, once watching).
   */
  health(): Promise<{ reachable: boolean; migrated: boolean; wakeUps?: boolean }>;
  /**
   * Tells of what other processes on the store did: `work` when they may have left work to do here (queued
   * jobs, a run cut short), `jobsFinished` when they finished jobs, and `missed` when such news may have been
   * lost (a lost connection), so that whoever waits on it looks again. Nothing on a store one process owns
   * (SQLite).
   */
  watch(events: StoreEvents): void;
  /** What worker thread `threadNumber` (unique in the process, from 1) is given to open the store itself. */
  handleFor(threadNumber: number): StoreHandle;
  /** Worker thread `threadNumber` died, perhaps in the middle of a write. */
  threadDied(threadNumber: number): void;
  /** `interrupted`: work was cut short (threads ended mid-run), so the store should not wait to tidy up. */
  close(options?: { interrupted?: boolean }): Promise<void>;
}
