import { and, asc, eq, isNull } from "drizzle-orm";
import type pg from "pg";
import type { AccessStore, Environment, KeyListing, StoredKey } from "../ports";
import { inTransaction, onPool, statement, type Db, type Queryable } from "./connection";
import { answer, faultCode } from "./faults";
import { apiKeys, environments } from "./schema";

const now = () => new Date().toISOString();
// api_keys.id is an integer column: a larger id (from a forged key, or a typo) names no key, rather than an error.
const maxKeyId = 2_147_483_647;
const uniqueViolation = (error: unknown) => faultCode(error) === "23505";

const insertEnvironment = statement(`INSERT INTO environments (slug, created_at) VALUES ($1, $2) RETURNING id, slug, created_at AS "createdAt"`);
const insertSequence = statement(`INSERT INTO job_sequences (environment_id, last_sequence) VALUES ($1, 0)`);
const insertKey = statement(`INSERT INTO api_keys (environment_id, secret_hash, created_at) VALUES ($1, $2, $3) RETURNING id`);
const lockFirstEnvironment = statement(`SELECT pg_advisory_xact_lock(hashtext('importd first environment'))`);
const anyEnvironment = statement(`SELECT id FROM environments LIMIT 1`);
const keyById = statement(
  `SELECT api_keys.id AS "keyId", environments.id AS "environmentId", environments.slug, api_keys.secret_hash AS "secretHash", api_keys.revoked_at AS "revokedAt"
   FROM api_keys JOIN environments ON environments.id = api_keys.environment_id WHERE api_keys.id = $1`,
);

/** Environments and their API keys on PostgreSQL. Every read goes to the database: no instance caches a key. */
export class PostgresAccessStore implements AccessStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly db: Db,
    private readonly any: Queryable = onPool(pool),
  ) {}

  // An environment comes with its job sequence row, which its intakes lock (see PostgresJobQueue.enqueue).
  private async insertEnvironmentNow(tx: Queryable, slug: string): Promise<Environment> {
    const [environment] = await tx.query<Environment>(insertEnvironment(slug, now()));
    await tx.query(insertSequence(environment!.id));
    return environment!;
  }

  private async insertKeyNow(tx: Queryable, environmentId: number, secretHash: Uint8Array): Promise<number> {
    const [key] = await tx.query<{ id: number }>(insertKey(environmentId, Buffer.from(secretHash), now()));
    return key!.id;
  }

  insertEnvironment(slug: string): Promise<Environment | undefined> {
    return answer(async () => {
      try {
        return await inTransaction(this.pool, (tx) => this.insertEnvironmentNow(tx, slug));
      } catch (error) {
        if (uniqueViolation(error)) return undefined;
        throw error;
      }
    });
  }

  insertFirstEnvironment(slug: string, secretHash: Uint8Array): Promise<{ environment: Environment; keyId: number } | undefined> {
    // Several instances may start at once on an empty database: one creates the first environment, under a
    // transaction-scoped advisory lock, and the others find it there.
    return answer(() =>
      inTransaction(this.pool, async (tx) => {
        await tx.query(lockFirstEnvironment());
        if ((await tx.query(anyEnvironment())).length > 0) return undefined;
        const environment = await this.insertEnvironmentNow(tx, slug);
        return { environment, keyId: await this.insertKeyNow(tx, environment.id, secretHash) };
      }),
    );
  }

  listEnvironments(): Promise<Environment[]> {
    return answer(() => this.db.select().from(environments).orderBy(asc(environments.slug)));
  }

  findEnvironment(slug: string): Promise<Environment | undefined> {
    return answer(async () => (await this.db.select().from(environments).where(eq(environments.slug, slug)))[0]);
  }

  insertKey(environmentId: number, secretHash: Uint8Array): Promise<number> {
    return answer(() => this.insertKeyNow(this.any, environmentId, secretHash));
  }

  listKeys(environmentId: number): Promise<KeyListing[]> {
    return answer(() =>
      this.db
        .select({ keyId: apiKeys.id, createdAt: apiKeys.createdAt, revokedAt: apiKeys.revokedAt })
        .from(apiKeys)
        .where(eq(apiKeys.environmentId, environmentId))
        .orderBy(asc(apiKeys.id)),
    );
  }

  revokeKey(keyId: number): Promise<"revoked" | "already revoked" | "unknown"> {
    if (keyId > maxKeyId) return Promise.resolve("unknown");
    return answer(async () => {
      const revoked = await this.db
        .update(apiKeys)
        .set({ revokedAt: now() })
        .where(and(eq(apiKeys.id, keyId), isNull(apiKeys.revokedAt)))
        .returning({ id: apiKeys.id });
      if (revoked.length > 0) return "revoked";
      return (await this.db.select({ id: apiKeys.id }).from(apiKeys).where(eq(apiKeys.id, keyId))).length > 0 ? "already revoked" : "unknown";
    });
  }

  findKey(keyId: number): Promise<StoredKey | undefined> {
    if (keyId > maxKeyId) return Promise.resolve(undefined);
    return answer(async () => (await this.any.query<StoredKey>(keyById(keyId)))[0]);
  }
}
