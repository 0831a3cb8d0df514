import { sql } from "drizzle-orm";
import { bigint, boolean, customType, doublePrecision, index, integer, pgTable, primaryKey, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";

// The same tables as store/sqlite/schema.ts, column for column (tests/store/schema-parity.test.ts keeps them
// so). Timestamps are ISO 8601 UTC text here too: the store code and the wire need no conversion, and they
// sort correctly as text. Job ids are bigint: several busy instances may outgrow 2^31 jobs.

const bytea = customType<{ data: Uint8Array; driverData: Buffer }>({
  dataType: () => "bytea",
  toDriver: (value) => Buffer.from(value.buffer, value.byteOffset, value.byteLength),
});
const jobId = (name: string) => bigint(name, { mode: "number" });

export const environments = pgTable("environments", {
  id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
  slug: text("slug").notNull().unique(),
  createdAt: text("created_at").notNull(),
});

export const apiKeys = pgTable(
  "api_keys",
  {
    id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
    environmentId: integer("environment_id")
      .notNull()
      .references(() => environments.id),
    // SHA-256 of the secret part; the secret itself is never stored.
    secretHash: bytea("secret_hash").notNull(),
    createdAt: text("created_at").notNull(),
    revokedAt: text("revoked_at"),
  },
  (table) => [index("api_keys_environment_idx").on(table.environmentId)],
);

export const jobs = pgTable(
  "jobs",
  {
    // By default, not always: `importd storage copy` keeps an appliance's job ids.
    id: jobId("id").primaryKey().generatedByDefaultAsIdentity(),
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
    attempts: integer("attempts").notNull().default(0),
    claimToken: text("claim_token"),
    // The job's place in its environment's acceptance order: the order runs take (ids are not commit order).
    sequence: bigint("sequence", { mode: "number" }).notNull(),
    dryRun: boolean("dry_run").notNull().default(false),
    operation: text("operation").notNull().default("upsert"),
    // See sqlite/schema.ts.
    syncId: integer("sync_id"),
  },
  (table) => [
    uniqueIndex("jobs_environment_sequence_idx").on(table.environmentId, table.sequence),
    index("jobs_environment_status_idx").on(table.environmentId, table.status, table.sequence),
    index("jobs_status_idx").on(table.status),
    index("jobs_completed_idx").on(table.completedAt),
    index("jobs_sync_idx").on(table.syncId, table.sequence).where(sql`sync_id IS NOT NULL`),
  ],
);

// The row an intake locks to number its environment's jobs; an apply run locks the environment's own row,
// so that intakes never wait for a run.
export const jobSequences = pgTable("job_sequences", {
  environmentId: integer("environment_id")
    .primaryKey()
    .references(() => environments.id),
  lastSequence: bigint("last_sequence", { mode: "number" }).notNull(),
});

// The body is stored as importd compressed it (zstd from 64 KB): the migration sets STORAGE EXTERNAL, so
// that PostgreSQL does not try to compress it again.
export const jobPayloads = pgTable("job_payloads", {
  jobId: jobId("job_id")
    .primaryKey()
    .references(() => jobs.id, { onDelete: "cascade" }),
  body: bytea("body").notNull(),
});

export const jobRejections = pgTable(
  "job_rejections",
  {
    jobId: jobId("job_id")
      .notNull()
      .references(() => jobs.id, { onDelete: "cascade" }),
    position: integer("position").notNull(),
    field: text("field").notNull(),
    message: text("message").notNull(),
    record: text("record").notNull(),
  },
  (table) => [primaryKey({ columns: [table.jobId, table.position] })],
);

export const idempotencyKeys = pgTable(
  "idempotency_keys",
  {
    environmentId: integer("environment_id")
      .notNull()
      .references(() => environments.id),
    key: text("key").notNull(),
    requestHash: text("request_hash").notNull(),
    jobId: jobId("job_id")
      .notNull()
      .references(() => jobs.id, { onDelete: "cascade" }),
    createdAt: text("created_at").notNull(),
  },
  (table) => [primaryKey({ columns: [table.environmentId, table.key] }), index("idempotency_keys_created_idx").on(table.createdAt)],
);

// Failed authentications of the last minute, per client address, so that the limit holds across instances
// (see access/failure-limiter.ts). PostgreSQL only: on SQLite one process counts them in memory. Unlogged (the
// migration says so): a crash may lose them, which costs nothing but a minute's count.
export const authFailures = pgTable(
  "auth_failures",
  {
    client: text("client").notNull(),
    // Milliseconds since the epoch.
    failedAt: bigint("failed_at", { mode: "number" }).notNull(),
  },
  (table) => [index("auth_failures_client_idx").on(table.client, table.failedAt), index("auth_failures_failed_idx").on(table.failedAt)],
);

// Each serving instance's heartbeat, so that the others can tell a stalled one (paused, frozen, cut off) from a
// busy one and end its connections (see liveness.ts). PostgreSQL only: one process serves a SQLite file.
// Unlogged (the migration says so): a crash empties it, and every live instance writes its row again within
// seconds.
export const instances = pgTable("instances", {
  // The instance's random id; its connections carry it in their application_name.
  id: text("id").primaryKey(),
  heartbeatAt: timestamp("heartbeat_at", { withTimezone: true, mode: "string" }).notNull(),
});

// Webhooks: the same three tables as on SQLite (see sqlite/schema.ts for what each holds).
export const webhooks = pgTable(
  "webhooks",
  {
    id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
    environmentId: integer("environment_id")
      .notNull()
      .references(() => environments.id),
    url: text("url").notNull(),
    events: text("events").notNull(),
    secret: text("secret").notNull(),
    createdAt: text("created_at").notNull(),
    disabledAt: text("disabled_at"),
    disabledReason: text("disabled_reason"),
  },
  (table) => [index("webhooks_environment_idx").on(table.environmentId)],
);

export const webhookDeliveries = pgTable(
  "webhook_deliveries",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedByDefaultAsIdentity(),
    // Random (msg_ and 128 bits): unique without an index to say so.
    messageId: text("message_id").notNull(),
    webhookId: integer("webhook_id").references(() => webhooks.id, { onDelete: "set null" }),
    environmentId: integer("environment_id")
      .notNull()
      .references(() => environments.id),
    jobId: jobId("job_id")
      .notNull()
      .references(() => jobs.id, { onDelete: "cascade" }),
    event: text("event").notNull(),
    url: text("url").notNull(),
    body: text("body").notNull(),
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

export const webhookAttempts = pgTable(
  "webhook_attempts",
  {
    deliveryId: bigint("delivery_id", { mode: "number" })
      .notNull()
      .references(() => webhookDeliveries.id, { onDelete: "cascade" }),
    attempt: integer("attempt").notNull(),
    at: text("at").notNull(),
    status: integer("status"),
    error: text("error"),
    // No longer written, nor read (DECISIONS 15: a receiver's body is not shown); attempts stored before keep theirs.
    response: text("response"),
    durationMs: integer("duration_ms").notNull(),
  },
  (table) => [primaryKey({ columns: [table.deliveryId, table.attempt] })],
);

// See sqlite/schema.ts. The position is an identity: see tombstones.ts for why it is in commit order where it counts.
export const tombstones = pgTable(
  "tombstones",
  {
    position: bigint("position", { mode: "number" }).primaryKey().generatedByDefaultAsIdentity(),
    environmentId: integer("environment_id")
      .notNull()
      .references(() => environments.id),
    resource: text("resource").notNull(),
    // COLLATE "C" as the records' ids (the migration says so), so that an id compares as it does there.
    id: text("id").notNull(),
    jobId: jobId("job_id").notNull(),
    deletedAt: text("deleted_at").notNull(),
  },
  (table) => [
    uniqueIndex("tombstones_record_idx").on(table.environmentId, table.resource, table.id),
    index("tombstones_position_idx").on(table.environmentId, table.resource, table.position),
    index("tombstones_deleted_idx").on(table.deletedAt),
  ],
);

// See sqlite/schema.ts.
export const syncs = pgTable("syncs", {
  // By default, not always: `importd storage copy` keeps an appliance's sync ids.
  id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
  environmentId: integer("environment_id")
    .notNull()
    .references(() => environments.id),
  resource: text("resource").notNull(),
  createdAt: text("created_at").notNull(),
  expiresAt: text("expires_at").notNull(),
  openedAfterSequence: bigint("opened_after_sequence", { mode: "number" }).notNull(),
  completedAt: text("completed_at"),
  completedByJobId: jobId("completed_by_job_id"),
  recordsSent: integer("records_sent"),
  failuresToldThrough: bigint("failures_told_through", { mode: "number" }),
});

// See sqlite/schema.ts. The id is COLLATE "C" as the records' ids (the migration says so).
export const syncRecords = pgTable(
  "sync_records",
  {
    syncId: integer("sync_id")
      .notNull()
      .references(() => syncs.id, { onDelete: "cascade" }),
    id: text("id").notNull(),
    // Sent by a dry run of the sync (?dryRun=true): counted by a dry-run completion only, so that a mirror can be tried
    // whole, its imports and its completion, with nothing applied. A real mark replaces a dry one, never the reverse.
    dryRun: boolean("dry_run").notNull().default(false),
  },
  (table) => [primaryKey({ columns: [table.syncId, table.id] })],
);

const recordKey = {
  environmentId: integer("environment_id").notNull(),
  // COLLATE "C" (migration 0005, by hand: Drizzle cannot say it): ids sort byte by byte, as on SQLite.
  id: text("id").notNull(),
};
const recordMeta = {
  updatedAt: text("updated_at").notNull(),
  lastJobId: jobId("last_job_id").notNull(),
};

const referenceTable = (name: string) =>
  pgTable(
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

export const assets = pgTable(
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
    startPoint: doublePrecision("start_point"),
    endPoint: doublePrecision("end_point"),
    linearReferenceStart: text("linear_reference_start"),
    linearReferenceEnd: text("linear_reference_end"),
    locationStart: doublePrecision("location_start"),
    locationEnd: doublePrecision("location_end"),
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

/**
 * The tables whose ids PostgreSQL generates (identity columns), each with its column: what storage copy carries on from
 * (either way), a tombstone's position too, which a reader of the deletions may hold as its cursor.
 */
export const identityColumns: Readonly<Record<string, string>> = { environments: "id", api_keys: "id", jobs: "id", webhooks: "id", webhook_deliveries: "id", tombstones: "position", syncs: "id" };
