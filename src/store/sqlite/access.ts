import { and, asc, eq, isNull, sql } from "drizzle-orm";
import type { AccessStore, Environment, KeyListing, StoredKey } from "../ports";
import { writeTransaction, type Db } from "./database";
import { answer } from "./faults";
import { apiKeys, environments } from "./schema";

const now = () => new Date().toISOString();

/** Environments and their API keys on SQLite. Every write is a writeTransaction, which the server's caches go by. */
export class SqliteAccessStore implements AccessStore {
  private readonly keyById;

  constructor(private readonly db: Db) {
    this.keyById = db
      .select({
        keyId: apiKeys.id,
        environmentId: environments.id,
        slug: environments.slug,
        secretHash: apiKeys.secretHash,
        revokedAt: apiKeys.revokedAt,
      })
      .from(apiKeys)
      .innerJoin(environments, eq(environments.id, apiKeys.environmentId))
      .where(eq(apiKeys.id, sql.placeholder("keyId")))
      .prepare();
  }

  private insertEnvironmentNow(db: Db, slug: string): Environment | undefined {
    if (db.select({ id: environments.id }).from(environments).where(eq(environments.slug, slug)).get()) return undefined;
    return db.insert(environments).values({ slug, createdAt: now() }).returning().get();
  }

  private insertKeyNow(db: Db, environmentId: number, secretHash: Uint8Array): number {
    return db.insert(apiKeys).values({ environmentId, secretHash: Buffer.from(secretHash), createdAt: now() }).returning({ id: apiKeys.id }).get().id;
  }

  insertEnvironment(slug: string): Promise<Environment | undefined> {
    return answer(() => writeTransaction(this.db, (tx) => this.insertEnvironmentNow(tx, slug)));
  }

  insertFirstEnvironment(slug: string, secretHash: Uint8Array): Promise<{ environment: Environment; keyId: number } | undefined> {
    return answer(() =>
      writeTransaction(this.db, (tx) => {
        if (tx.select({ id: environments.id }).from(environments).limit(1).get()) return undefined;
        const environment = this.insertEnvironmentNow(tx, slug)!;
        return { environment, keyId: this.insertKeyNow(tx, environment.id, secretHash) };
      }),
    );
  }

  listEnvironments(): Promise<Environment[]> {
    return answer(() => this.db.select().from(environments).orderBy(asc(environments.slug)).all());
  }

  findEnvironment(slug: string): Promise<Environment | undefined> {
    return answer(() => this.db.select().from(environments).where(eq(environments.slug, slug)).get());
  }

  insertKey(environmentId: number, secretHash: Uint8Array): Promise<number> {
    return answer(() => writeTransaction(this.db, (tx) => this.insertKeyNow(tx, environmentId, secretHash)));
  }

  listKeys(environmentId: number): Promise<KeyListing[]> {
    return answer(() =>
      this.db
        .select({ keyId: apiKeys.id, createdAt: apiKeys.createdAt, revokedAt: apiKeys.revokedAt })
        .from(apiKeys)
        .where(eq(apiKeys.environmentId, environmentId))
        .orderBy(asc(apiKeys.id))
        .all(),
    );
  }

  revokeKey(keyId: number): Promise<"revoked" | "already revoked" | "unknown"> {
    return answer(() =>
      writeTransaction(this.db, (tx) => {
        const revoked = tx
          .update(apiKeys)
          .set({ revokedAt: now() })
          .where(and(eq(apiKeys.id, keyId), isNull(apiKeys.revokedAt)))
          .returning({ id: apiKeys.id })
          .all();
        if (revoked.length > 0) return "revoked";
        return tx.select({ id: apiKeys.id }).from(apiKeys).where(eq(apiKeys.id, keyId)).get() ? "already revoked" : "unknown";
      }),
    );
  }

  findKey(keyId: number): Promise<StoredKey | undefined> {
    return answer(() => this.keyById.get({ keyId }));
  }
}
