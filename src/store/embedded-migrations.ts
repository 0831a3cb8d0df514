// drizzle-kit writes each dialect's migrations to a folder (drizzle/ for SQLite, drizzle-pg/ for PostgreSQL);
// each store imports them as text so that `bun build --compile` embeds them: Drizzle's public migrate() reads
// a folder, and cannot read files out of a compiled binary. This turns them into what Drizzle's dialects
// migrate from, which is what the public migrate() builds once it has read the folder.

export type EmbeddedMigration = {
  sql: string[];
  bps: boolean;
  folderMillis: number;
  hash: string;
};

type Journal = { entries: Array<{ tag: string; when: number; breakpoints: boolean }> };

/** The journal's migrations in its order; `sqlByTag`: each one's SQL text, by its tag. */
export function embeddedMigrations(journal: Journal, sqlByTag: Record<string, string>, embeddedIn: string): EmbeddedMigration[] {
  return journal.entries.map((entry) => {
    const text = sqlByTag[entry.tag];
    if (text === undefined) throw new Error(`migration ${entry.tag} is in the journal but not embedded in ${embeddedIn}`);
    return {
      sql: text.split("--> statement-breakpoint"),
      bps: entry.breakpoints,
      folderMillis: entry.when,
      hash: new Bun.CryptoHasher("sha256").update(text).digest("hex"),
    };
  });
}
