import {
  blob,
  index,
  integer,
  primaryKey,
  real,
  sqliteTable,
  text,
  uniqueIndex,
} from "drizzle-orm/sqlite-core";
import { sql } from "drizzle-orm";

// Timestamps are ISO 8601 UTC strings: they sort correctly as text and need no conversion on the wire.

export const environments = sqliteTable("environments", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  slug: text("slug").notNull().unique(),
  createdAt: text("created_at").notNull(),
});

export const apiKeys = sqliteTable(
  "api_keys",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    environmentId: integer("environment_id")
      .notNull()
      .references(() => environments.id),
    // SHA-256 of the secret part; the secret itself is never stored.
    secretHash: blob("secret_hash", { mode: "buffer" }).notNull(),
    createdAt: text("created_at").notNull(),
    revokedAt: text("revoked_at"),
  },
  (table) => [index("api_keys_environment_idx").on(table.environmentId)],
);

export const jobs = sqliteTable(
  "jobs",
  {
    // AUTOINCREMENT: a job id is never reused, even after old jobs are purged.
    id: integer("id").primaryKey({ autoIncrement: true }),
    environmentId: integer("environment_id")
      .notNull()
      .references(() => environments.id),
    type: text("type").notNull(),
    status: text("status").notNull(),
    recordCount: integer("record_count").notNull(),
    createdAt: text("created_at").notNull(),
    startedAt: text("started_at"),
    completedAt: text("completed_at"),
    // JSON text of the job's output, null until the job is terminal.
    output: text("output"),
    // Runs started on the job, counted when claimed (so a run cut short by a crash counts too).
    attempts: integer("attempts").notNull().default(0),
    // The token of the run that has claimed the job while it is Processing; completing the run checks it.
    claimToken: text("claim_token"),
    // The job's place in its environment's acceptance order (from job_sequences): the order runs take.
    sequence: integer("sequence").notNull(),
    // A dry run (?dryRun=true): applied in a savepoint that is rolled back; only its outcome stays.
    dryRun: integer("dry_run", { mode: "boolean" }).notNull().default(false),
    // What the job does to its records (domain/job.ts, JobOperation): upsert (an import) or delete.
    operation: text("operation").notNull().default("upsert"),
    // The sync (a mirror, DECISIONS 13) the job belongs to: an import that joined it, or its completion. No key to
    // syncs: a sync is purged by its own end, as its jobs are by theirs.
    syncId: integer("sync_id"),
  },
  (table) => [
    uniqueIndex("jobs_environment_sequence_idx").on(table.environmentId, table.sequence),
    index("jobs_environment_status_idx").on(table.environmentId, table.status, table.sequence),
    index("jobs_status_idx").on(table.status),
    index("jobs_completed_idx").on(table.completedAt),
    // Partial: a job outside any sync (nearly all) adds no entry, so that ordinary imports pay nothing for it.
    index("jobs_sync_idx").on(table.syncId, table.sequence).where(sql`sync_id IS NOT NULL`),
  ],
);

// Each environment's last job sequence number. An intake takes the next numbers in an update of its
// environment's row, which also orders intakes of one environment: in the order they commit, even across
// processes on one database (job ids, taken before commit, are not).
export const jobSequences = sqliteTable("job_sequences", {
  environmentId: integer("environment_id")
    .primaryKey()
    .references(() => environments.id),
  lastSequence: integer("last_sequence").notNull(),
});

// Kept apart from jobs so that status reads never touch the (possibly 100 MB) body.
export const jobPayloads = sqliteTable("job_payloads", {
  jobId: integer("job_id")
    .primaryKey()
    .references(() => jobs.id, { onDelete: "cascade" }),
  body: blob("body", { mode: "buffer" }).notNull(),
});

// The records a finished job rejected, kept (like the job document) until the job is purged, so that a
// client can fetch exactly those, fix them and send them again.
export const jobRejections = sqliteTable(
  "job_rejections",
  {
    jobId: integer("job_id")
      .notNull()
      .references(() => jobs.id, { onDelete: "cascade" }),
    // The record's index in the batch.
    position: integer("position").notNull(),
    field: text("field").notNull(),
    message: text("message").notNull(),
    // JSON text of the record as it was sent.
    record: text("record").notNull(),
  },
  (table) => [primaryKey({ columns: [table.jobId, table.position] })],
);

// An import POST's Idempotency-Key, for 24 hours: the same key with the same request returns its job
// instead of queueing a second one.
export const idempotencyKeys = sqliteTable(
  "idempotency_keys",
  {
    environmentId: integer("environment_id")
      .notNull()
      .references(() => environments.id),
    key: text("key").notNull(),
    // SHA-256 (hex) of the resource path and the body bytes.
    requestHash: text("request_hash").notNull(),
    jobId: integer("job_id")
      .notNull()
      .references(() => jobs.id, { onDelete: "cascade" }),
    createdAt: text("created_at").notNull(),
  },
  (table) => [primaryKey({ columns: [table.environmentId, table.key] }), index("idempotency_keys_created_idx").on(table.createdAt)],
);

// An environment's webhook subscriptions (DECISIONS 10). The signing secret is kept as it is: importd signs with
// it at every delivery (Standard Webhooks' HMAC is symmetric), and shows it only in the answer that created it.
export const webhooks = sqliteTable(
  "webhooks",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    environmentId: integer("environment_id")
      .notNull()
      .references(() => environments.id),
    url: text("url").notNull(),
    // JSON array of the event types it wants.
    events: text("events").notNull(),
    secret: text("secret").notNull(),
    createdAt: text("created_at").notNull(),
    // Set when a receiver answered 410 Gone: nothing more is sent to it.
    disabledAt: text("disabled_at"),
    disabledReason: text("disabled_reason"),
  },
  (table) => [index("webhooks_environment_idx").on(table.environmentId)],
);

// The outbox: one row per event per subscription, written in the transaction that makes its job terminal (or
// cancels it), so that a crash after that commit still delivers it. Any process delivers it, claimed with a
// token and a lease (claim_token, claimed_until) so that it is never sent twice at once; the body and the
// message id (webhook-id) are fixed here, the same at every attempt.
export const webhookDeliveries = sqliteTable(
  "webhook_deliveries",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    // Random (msg_ and 128 bits): unique without an index to say so.
    messageId: text("message_id").notNull(),
    // Null once the subscription was removed (its history stays with the job).
    webhookId: integer("webhook_id").references(() => webhooks.id, { onDelete: "set null" }),
    environmentId: integer("environment_id")
      .notNull()
      .references(() => environments.id),
    jobId: integer("job_id")
      .notNull()
      .references(() => jobs.id, { onDelete: "cascade" }),
    event: text("event").notNull(),
    url: text("url").notNull(),
    body: text("body").notNull(),
    // pending, delivered, failed (gave up, or the receiver is gone) or canceled (its subscription removed).
    status: text("status").notNull(),
    attempts: integer("attempts").notNull().default(0),
    createdAt: text("created_at").notNull(),
    nextAttemptAt: text("next_attempt_at"),
    claimToken: text("claim_token"),
    claimedUntil: text("claimed_until"),
    completedAt: text("completed_at"),
  },
  // Claims look subscription by subscription: its next due delivery, and whether it has one claimed (an index each).
  // No more: every ended job inserts a row here in its run's transaction, and each index costs that insert.
  (table) => [
    index("webhook_deliveries_webhook_due_idx").on(table.webhookId, table.status, table.nextAttemptAt),
    index("webhook_deliveries_webhook_claimed_idx").on(table.webhookId, table.status, table.claimedUntil),
    index("webhook_deliveries_job_idx").on(table.jobId),
  ],
);

// Each attempt of a delivery, and what the receiver answered (its first 1 KB).
export const webhookAttempts = sqliteTable(
  "webhook_attempts",
  {
    deliveryId: integer("delivery_id")
      .notNull()
      .references(() => webhookDeliveries.id, { onDelete: "cascade" }),
    attempt: integer("attempt").notNull(),
    at: text("at").notNull(),
    // The receiver's status code; null when there was no answer (refused, timed out, not allowed).
    status: integer("status"),
    error: text("error"),
    // No longer written, nor read (DECISIONS 15: a receiver's body is not shown); attempts stored before keep theirs.
    response: text("response"),
    durationMs: integer("duration_ms").notNull(),
  },
  (table) => [primaryKey({ columns: [table.deliveryId, table.attempt] })],
);

// What a delete job leaves of each record it deleted, for readers that follow deletions (GET /v2/deletions/<resource>)
// and for the 404 of a deleted record: kept as long as job documents, and ended when the id is imported again. No key
// to jobs: a tombstone outlives nothing, it is purged by its own deletedAt as jobs are by theirs. Positions follow
// deletedAt (one writer, the time read under the write lock), so the purge takes the oldest positions of each
// environment's resource, by the position index: an index on deletedAt would cost every deletion a third index entry
// for the sake of an hourly purge.
// WITHOUT ROWID (the migration says so; Drizzle cannot), keyed by the record: two b-trees a tombstone, the key and the
// positions, where a rowid table with a unique index on the record kept three (docs/performance.md, row d1).
export const tombstones = sqliteTable(
  "tombstones",
  {
    // The order deletions happened in, the cursor of the pages. Never handed out again, even once the newest
    // tombstones are purged or ended, so that a reader's cursor never lands before a later deletion: the last one
    // handed out is kept in sqlite_sequence under this table's name, where SQLite keeps an AUTOINCREMENT's (which
    // needs a rowid), and where storage copy and backups carry it as they carry the others (tombstones.ts).
    position: integer("position").notNull(),
    environmentId: integer("environment_id")
      .notNull()
      .references(() => environments.id),
    // The resource's path (assets, subareas, ...).
    resource: text("resource").notNull(),
    id: text("id").notNull(),
    jobId: integer("job_id").notNull(),
    deletedAt: text("deleted_at").notNull(),
  },
  // The key: one tombstone per record, found by id (the 404, an import's end of it, "has this resource any?"); the
  // pages, and the purge, seek the positions.
  (table) => [
    primaryKey({ columns: [table.environmentId, table.resource, table.id] }),
    index("tombstones_position_idx").on(table.environmentId, table.resource, table.position),
  ],
);

// A mirror (DECISIONS 13): imports join it, and its completion deletes the resource's records that none of them sent
// and no other job wrote since it opened.
export const syncs = sqliteTable("syncs", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  environmentId: integer("environment_id")
    .notNull()
    .references(() => environments.id),
  // The resource's path (assets, subareas, ...).
  resource: text("resource").notNull(),
  createdAt: text("created_at").notNull(),
  expiresAt: text("expires_at").notNull(),
  // The environment's last job sequence when the sync opened (job_sequences): a job numbered after it, outside the
  // sync, wrote after the opening, and what it wrote is kept.
  openedAfterSequence: integer("opened_after_sequence").notNull(),
  // Set by the completion that ran past its guards (not a dry run): the sync has ended.
  completedAt: text("completed_at"),
  completedByJobId: integer("completed_by_job_id"),
  // The records its jobs had sent when it ended: its marks are dropped then.
  recordsSent: integer("records_sent"),
  // A completion stopped by jobs of the sync that failed as a whole told of those up to this sequence: the next
  // completion looks only at the jobs after it (jobs/syncs.ts).
  failuresToldThrough: integer("failures_told_through"),
});

// The ids a sync's jobs sent (every record of their batches, rejected ones too), written in each run's transaction by
// the sync's jobs only: an import without a sync writes nothing here. Dropped when the sync ends.
export const syncRecords = sqliteTable(
  "sync_records",
  {
    syncId: integer("sync_id")
      .notNull()
      .references(() => syncs.id, { onDelete: "cascade" }),
    id: text("id").notNull(),
    // Sent by a dry run of the sync (?dryRun=true): counted by a dry-run completion only, so that a mirror can be tried
    // whole, its imports and its completion, with nothing applied. A real mark replaces a dry one, never the reverse.
    dryRun: integer("dry_run", { mode: "boolean" }).notNull().default(false),
  },
  (table) => [primaryKey({ columns: [table.syncId, table.id] })],
);

// Columns every resource table shares: the environment scope, the external id, and who wrote it last.
const recordKey = {
  environmentId: integer("environment_id").notNull(),
  id: text("id").notNull(),
};
const recordMeta = {
  updatedAt: text("updated_at").notNull(),
  lastJobId: integer("last_job_id").notNull(),
};

const referenceTable = (name: string) =>
  sqliteTable(
    name,
    {
      ...recordKey,
      name: text("name").notNull(),
      description: text("description"),
      ...recordMeta,
    },
    (table) => [primaryKey({ columns: [table.environmentId, table.id] })],
  );

export const subAreas = referenceTable("sub_areas");
export const assetTypes = referenceTable("asset_types");
export const assetCategories = referenceTable("asset_categories");

export const assets = sqliteTable(
  "assets",
  {
    ...recordKey,
    subAreaId: text("sub_area_id").notNull(),
    name: text("name").notNull(),
    description: text("description"),
    status: text("status").notNull(),
    assetCategoryId: text("asset_category_id").notNull(),
    assetTypeId: text("asset_type_id").notNull(),
    shapeType: text("shape_type").notNull(),
    startPoint: real("start_point"),
    endPoint: real("end_point"),
    linearReferenceStart: text("linear_reference_start"),
    linearReferenceEnd: text("linear_reference_end"),
    locationStart: real("location_start"),
    locationEnd: real("location_end"),
    locationUnit: text("location_unit"),
    ...recordMeta,
  },
  (table) => [primaryKey({ columns: [table.environmentId, table.id] })],
);


/** Each import resource's table, by the resource's path. */
export const recordTables: Readonly<Record<string, typeof subAreas | typeof assets>> = {
  subareas: subAreas,
  assettypes: assetTypes,
  assetcategories: assetCategories,
  assets,
};
