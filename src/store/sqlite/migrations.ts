// SQLite's drizzle-kit migrations (drizzle/), embedded (see ../embedded-migrations.ts).
// Adding one: run `npm run db:generate`, then add its file here (a test checks none is missing).
import journal from "../../../drizzle/meta/_journal.json" with { type: "json" };
import initial from "../../../drizzle/0000_initial.sql" with { type: "text" };
import rejectedRecords from "../../../drizzle/0001_rejected_records.sql" with { type: "text" };
import idempotencyKeys from "../../../drizzle/0002_idempotency_keys.sql" with { type: "text" };
import runClaimTokens from "../../../drizzle/0003_run_claim_tokens.sql" with { type: "text" };
import jobSequences from "../../../drizzle/0004_job_sequences.sql" with { type: "text" };
import dryRun from "../../../drizzle/0005_dry_run.sql" with { type: "text" };
import webhooks from "../../../drizzle/0006_webhooks.sql" with { type: "text" };
import tombstones from "../../../drizzle/0007_tombstones.sql" with { type: "text" };
import syncs from "../../../drizzle/0008_syncs.sql" with { type: "text" };
import syncDryMarks from "../../../drizzle/0009_sync_dry_marks.sql" with { type: "text" };
import tombstonesByPosition from "../../../drizzle/0010_tombstones_purge_by_position.sql" with { type: "text" };
import tombstonesWithoutRowid from "../../../drizzle/0011_tombstones_without_rowid.sql" with { type: "text" };
import { embeddedMigrations as embed, type EmbeddedMigration } from "../embedded-migrations";

const sqlByTag: Record<string, string> = {
  "0000_initial": initial,
  "0001_rejected_records": rejectedRecords,
  "0002_idempotency_keys": idempotencyKeys,
  "0003_run_claim_tokens": runClaimTokens,
  "0004_job_sequences": jobSequences,
  "0005_dry_run": dryRun,
  "0006_webhooks": webhooks,
  "0007_tombstones": tombstones,
  "0008_syncs": syncs,
  "0009_sync_dry_marks": syncDryMarks,
  "0010_tombstones_purge_by_position": tombstonesByPosition,
  "0011_tombstones_without_rowid": tombstonesWithoutRowid,
};

export const embeddedMigrations = (): EmbeddedMigration[] => embed(journal, sqlByTag, "src/store/sqlite/migrations.ts");

export const embeddedMigrationTags = () => Object.keys(sqlByTag);
