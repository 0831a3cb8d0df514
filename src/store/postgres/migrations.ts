// PostgreSQL's drizzle-kit migrations (drizzle-pg/), embedded (see ../embedded-migrations.ts).
// Adding one: run `npm run db:generate`, then add its file here (a test checks none is missing).
import journal from "../../../drizzle-pg/meta/_journal.json" with { type: "json" };
import initial from "../../../drizzle-pg/0000_initial.sql" with { type: "text" };
import authFailures from "../../../drizzle-pg/0001_auth_failures.sql" with { type: "text" };
import dryRun from "../../../drizzle-pg/0002_dry_run.sql" with { type: "text" };
import instances from "../../../drizzle-pg/0003_instances.sql" with { type: "text" };
import webhooks from "../../../drizzle-pg/0004_webhooks.sql" with { type: "text" };
import idsInByteOrder from "../../../drizzle-pg/0005_ids_in_byte_order.sql" with { type: "text" };
import tombstones from "../../../drizzle-pg/0006_tombstones.sql" with { type: "text" };
import syncs from "../../../drizzle-pg/0007_syncs.sql" with { type: "text" };
import syncDryMarks from "../../../drizzle-pg/0008_sync_dry_marks.sql" with { type: "text" };
import { embeddedMigrations as embed, type EmbeddedMigration } from "../embedded-migrations";

const sqlByTag: Record<string, string> = {
  "0000_initial": initial,
  "0001_auth_failures": authFailures,
  "0002_dry_run": dryRun,
  "0003_instances": instances,
  "0004_webhooks": webhooks,
  "0005_ids_in_byte_order": idsInByteOrder,
  "0006_tombstones": tombstones,
  "0007_syncs": syncs,
  "0008_sync_dry_marks": syncDryMarks,
};

export const embeddedMigrations = (): EmbeddedMigration[] => embed(journal, sqlByTag, "src/store/postgres/migrations.ts");

export const embeddedMigrationTags = () => Object.keys(sqlByTag);
