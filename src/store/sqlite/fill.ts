// A new data directory's database, filled with another store's data, for `importd storage copy --from` (see
// store/copy.ts): written whole under a temporary name in the data directory, then renamed into place.
import { Database } from "bun:sqlite";
import { drizzle } from "drizzle-orm/bun-sqlite";
import { closeSync, existsSync, openSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { checkCopied, type CopyReport, type CopySource, type OnTable } from "../copy";
import { fileMode } from "../data-directory";
import { DatabaseError } from "../errors";
import { describeFailure, moveIntoPlace } from "./backup";
import { databaseFile, migrate, type Db } from "./database";
import * as schema from "./schema";
import { lockDataDirectory, type ServerLock } from "./server-lock";

// What a copy killed in the middle leaves: its file, and the journal of its transaction.
const partialName = /^importd\.sqlite\.copying-\d+(-journal)?$/;

/** An empty data directory, held as a server holds it (so that none starts on it) until its database is in place. */
export class NewSqliteDatabase {
  private constructor(
    private readonly dataDir: string,
    private readonly lock: ServerLock,
  ) {}

  /** StoreInUse if a server runs on `dataDir`; DatabaseError if it holds a database already. Creates it if need be. */
  static claim(dataDir: string): NewSqliteDatabase {
    const lock = lockDataDirectory(dataDir, "stop it first: storage copy --from writes a new database into an empty data directory");
    try {
      const file = databaseFile(dataDir);
      if (existsSync(file)) {
        throw new DatabaseError(
          `${dataDir} already holds an importd database (${file}): storage copy --from writes only into an empty data directory, so that nothing there is mixed with or overwritten by the PostgreSQL database's data. Give a new --data-dir, or move that database away (back it up first if you may want it).`,
        );
      }
      // Under the lock no other copy runs on the directory: what is there was left by one that was killed.
      for (const name of readdirSync(dataDir)) if (partialName.test(name)) rmSync(join(dataDir, name), { force: true });
    } catch (error) {
      lock.release();
      throw error;
    }
    return new NewSqliteDatabase(dataDir, lock);
  }

  /**
   * Writes `source` into a new database beside the real name, in one transaction, counts each table against the
   * source, sets the AUTOINCREMENT counters (sqlite_sequence) to carry on after the source's last ids (purged rows'
   * included), and only then renames it into place. Whatever stops it, there is no database at the real name.
   */
  async fill(source: CopySource, onTable: OnTable): Promise<CopyReport> {
    const file = `${databaseFile(this.dataDir)}.copying-${process.pid}`;
    try {
      // Made 0600 before anything is in it: the database holds key hashes and webhook secrets.
      closeSync(openSync(file, "wx", fileMode));
      const client = new Database(file);
      let report: CopyReport;
      try {
        report = await fillDatabase(client, source, onTable);
      } finally {
        client.close();
      }
      moveIntoPlace(file, this.dataDir);
      return report;
    } catch (error) {
      rmSync(file, { force: true });
      rmSync(`${file}-journal`, { force: true });
      if (error instanceof DatabaseError) throw error;
      throw new DatabaseError(`the copy into ${this.dataDir} failed, no database was written there: ${describeFailure(error)}`);
    }
  }

  release(): void {
    this.lock.release();
  }
}

async function fillDatabase(client: Database, source: CopySource, onTable: OnTable): Promise<CopyReport> {
  client.exec("PRAGMA foreign_keys = ON");
  migrate(drizzle({ client, schema }) as Db);
  client.exec("BEGIN IMMEDIATE");
  try {
    const report: CopyReport = {};
    for (const table of source.tables) {
      const insert = client.prepare(`INSERT INTO ${quoted(table.name)} (${table.columns.map(quoted).join(", ")}) VALUES (${table.columns.map(() => "?").join(", ")})`);
      try {
        for await (const batch of table.batches()) {
          for (const row of batch) insert.run(...(table.columns.map((column) => row[column] ?? null) as Array<string | number | boolean | Uint8Array | null>));
        }
      } finally {
        insert.finalize();
      }
      const { count } = client.query(`SELECT count(*) AS count FROM ${quoted(table.name)}`).get() as { count: number };
      checkCopied(table, count);
      report[table.name] = count;
      await onTable(table.name, count);
    }
    // Inserting an id moves the counter up to it; a purged row's id, beyond the highest row copied, is set here. The
    // tombstones' positions are counted there too, by importd (schema.ts), from the counter their migration made.
    const counted = (client.query("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%AUTOINCREMENT%' UNION SELECT name FROM sqlite_sequence").all() as Array<{ name: string }>).map((row) => row.name);
    for (const [name, last] of Object.entries(source.lastIds)) {
      if (!counted.includes(name)) continue;
      client.run("INSERT INTO sqlite_sequence (name, seq) SELECT ?1, 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = ?1)", [name]);
      client.run("UPDATE sqlite_sequence SET seq = max(seq, ?2) WHERE name = ?1", [name, last]);
    }
    client.exec("COMMIT");
    return report;
  } catch (error) {
    if (client.inTransaction) client.exec("ROLLBACK");
    throw error;
  }
}

const quoted = (name: string) => `"${name}"`;
