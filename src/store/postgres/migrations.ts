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
import type pg from "pg";
import { embeddedMigrations as embed, type EmbeddedMigration } from "../embedded-migrations";
import { DatabaseError } from "../errors";

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

/**
 * How many of this importd's migrations the database has (0: none, an empty database). Refuses a database another
 * program's tables are in, one a newer importd has migrated, and one with migrations this importd does not know.
 */
export async function appliedMigrations(session: pg.Client): Promise<number> {
  const rows = async <R extends Record<string, unknown>>(text: string) => (await session.query<R>(text)).rows;
  const known = embeddedMigrations();
  const [{ migrated }] = (await rows<{ migrated: boolean }>("SELECT to_regclass('drizzle.__drizzle_migrations') IS NOT NULL AS migrated")) as [{ migrated: boolean }];
  if (migrated) {
    const applied = await rows<{ hash: string }>("SELECT hash FROM drizzle.__drizzle_migrations ORDER BY id");
    if (applied.length > known.length) throw new DatabaseError(`the database was migrated by a newer importd (${applied.length} migrations; this importd knows ${known.length}): run the newer importd`);
    if (applied.some((row, index) => row.hash !== known[index]!.hash)) throw new DatabaseError("the database has migrations this importd does not know");
    return applied.length;
  }
  const tables = (await rows<{ tablename: string }>("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename LIMIT 6")).map((row) => row.tablename);
  if (tables.length > 0) {
    throw new DatabaseError(`the database was not created by importd (it holds the tables ${tables.slice(0, 5).join(", ")}${tables.length > 5 ? ", …" : ""}): give importd a database of its own`);
  }
  return 0;
}
