// drizzle-kit writes migrations to drizzle/; they are imported here as text so that `bun build --compile`
// embeds them (Drizzle's public migrate() reads a folder, and cannot read files out of a compiled binary).
// Adding a migration: run `npm run db:generate`, then add its file here (a test checks none is missing).
import journal from "../../../drizzle/meta/_journal.json" with { type: "json" };
import initial from "../../../drizzle/0000_initial.sql" with { type: "text" };
import rejectedRecords from "../../../drizzle/0001_rejected_records.sql" with { type: "text" };
import idempotencyKeys from "../../../drizzle/0002_idempotency_keys.sql" with { type: "text" };
import runClaimTokens from "../../../drizzle/0003_run_claim_tokens.sql" with { type: "text" };

const sqlByTag: Record<string, string> = {
  "0000_initial": initial,
  "0001_rejected_records": rejectedRecords,
  "0002_idempotency_keys": idempotencyKeys,
  "0003_run_claim_tokens": runClaimTokens,
};

export type EmbeddedMigration = {
  sql: string[];
  bps: boolean;
  folderMillis: number;
  hash: string;
};

export function embeddedMigrations(): EmbeddedMigration[] {
  return journal.entries.map((entry) => {
    const text = sqlByTag[entry.tag];
    if (text === undefined) throw new Error(`migration ${entry.tag} is in the journal but not embedded in src/store/sqlite/migrations.ts`);
    return {
      sql: text.split("--> statement-breakpoint"),
      bps: entry.breakpoints,
      folderMillis: entry.when,
      hash: new Bun.CryptoHasher("sha256").update(text).digest("hex"),
    };
  });
}

export const embeddedMigrationTags = () => Object.keys(sqlByTag);
