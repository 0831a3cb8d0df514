import { and, asc, eq, isNull, sql } from "drizzle-orm";
import { writeTransaction, type Db } from "../db/client";
import { apiKeys, environments } from "../db/schema";
import { formatKey, hashSecret, newSecret, parseKey, secretMatches } from "./api-key";

export const slugPattern = /^[a-z0-9][a-z0-9-]{0,62}$/;

export type Environment = typeof environments.$inferSelect;

export class AccessError extends Error {}

const now = () => new Date().toISOString();

/** Environments and their API keys. Every read goes to the database, so CLI changes apply at once. */
export class AccessRepository {
  private readonly keyById;

  constructor(private readonly db: Db) {
    this.keyById = db
      .select({
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

  createEnvironment(slug: string): Environment {
    if (!slugPattern.test(slug)) {
      throw new AccessError(
        `'${slug}' is not a valid environment name: use 1 to 63 lowercase letters, digits and '-', starting with a letter or digit (for example acme-prod).`,
      );
    }
    if (this.findEnvironment(slug)) throw new AccessError(`environment '${slug}' already exists`);
    return this.db.insert(environments).values({ slug, createdAt: now() }).returning().get();
  }

  /** On a database with no environment: creates `slug` and its first key together. Otherwise does nothing. */
  createFirstEnvironment(slug: string): string | undefined {
    return writeTransaction(this.db, () => {
      if (this.listEnvironments().length > 0) return undefined;
      this.createEnvironment(slug);
      return this.createKey(slug);
    });
  }

  listEnvironments(): Environment[] {
    return this.db.select().from(environments).orderBy(asc(environments.slug)).all();
  }

  findEnvironment(slug: string): Environment | undefined {
    return this.db.select().from(environments).where(eq(environments.slug, slug)).get();
  }

  private requireEnvironment(slug: string): Environment {
    const environment = this.findEnvironment(slug);
    if (!environment) throw new AccessError(`environment '${slug}' does not exist (see: importd env list)`);
    return environment;
  }

  /** Issues a key for the environment and returns it whole; it cannot be shown again. */
  createKey(slug: string): string {
    const environment = this.requireEnvironment(slug);
    const secret = newSecret();
    const row = this.db
      .insert(apiKeys)
      .values({ environmentId: environment.id, secretHash: hashSecret(secret), createdAt: now() })
      .returning({ id: apiKeys.id })
      .get();
    return formatKey(secret, row.id);
  }

  listKeys(slug: string) {
    const environment = this.requireEnvironment(slug);
    return this.db
      .select({ keyId: apiKeys.id, createdAt: apiKeys.createdAt, revokedAt: apiKeys.revokedAt })
      .from(apiKeys)
      .where(eq(apiKeys.environmentId, environment.id))
      .orderBy(asc(apiKeys.id))
      .all();
  }

  revokeKey(keyId: number): void {
    const revoked = this.db
      .update(apiKeys)
      .set({ revokedAt: now() })
      .where(and(eq(apiKeys.id, keyId), isNull(apiKeys.revokedAt)))
      .returning({ id: apiKeys.id })
      .all();
    if (revoked.length === 0) {
      const exists = this.db.select({ id: apiKeys.id }).from(apiKeys).where(eq(apiKeys.id, keyId)).get();
      throw new AccessError(exists ? `key ${keyId} is already revoked` : `key ${keyId} does not exist`);
    }
  }

  /** The environment id the key grants access to, or undefined. Which check failed is never told. */
  authenticate(slug: string, headerValue: string | null): number | undefined {
    if (headerValue === null) return undefined;
    const parsed = parseKey(headerValue);
    const row = parsed ? this.keyById.get({ keyId: parsed.keyId }) : undefined;
    // The secret is hashed and compared even when the key is unknown, to keep timing flat.
    const matches = secretMatches(parsed?.secret ?? headerValue, row?.secretHash);
    if (!row || !matches || row.revokedAt !== null || row.slug !== slug) return undefined;
    return row.environmentId;
  }
}
