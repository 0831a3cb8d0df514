import type { AccessStore, CommitWatch, Environment, KeyListing } from "../store/ports";
import { CommittedReads } from "../store/read-cache";
import { formatKey, hashSecret, newSecret, parseKey, secretMatches } from "./api-key";

export const slugPattern = /^[a-z0-9][a-z0-9-]{0,62}$/;

// How a key that passed is remembered: neither a slug nor a key that can pass has a space, so no two pairs share one.
const passedKey = (slug: string, headerValue: string) => `${slug} ${headerValue}`;

export type { Environment };

/** A request about environments or keys that cannot be done (an unknown environment, a bad slug). */
export class AccessError extends Error {}

/** Environments and their API keys: the rules, over the store's AccessStore. Shared by the CLI and the server. */
export class Access {
  // Keys that passed, by environment slug and header value, while nothing was committed (see read-cache.ts):
  // a request with the very same key then costs neither a lookup nor a hash. Only where the store can tell.
  private readonly passed?: CommittedReads<string, number>;

  constructor(
    private readonly store: AccessStore,
    commits?: CommitWatch,
  ) {
    if (commits) this.passed = new CommittedReads(commits);
  }

  async createEnvironment(slug: string): Promise<Environment> {
    if (!slugPattern.test(slug)) {
      throw new AccessError(
        `'${slug}' is not a valid environment name: use 1 to 63 lowercase letters, digits and '-', starting with a letter or digit (for example acme-prod).`,
      );
    }
    const environment = await this.store.insertEnvironment(slug);
    if (!environment) throw new AccessError(`environment '${slug}' already exists`);
    return environment;
  }

  /** On a database with no environment: creates `slug` and its first key together, and returns the key. Otherwise does nothing. */
  async createFirstEnvironment(slug: string): Promise<string | undefined> {
    const secret = newSecret();
    const created = await this.store.insertFirstEnvironment(slug, hashSecret(secret));
    return created && formatKey(secret, created.keyId);
  }

  listEnvironments(): Promise<Environment[]> {
    return this.store.listEnvironments();
  }

  findEnvironment(slug: string): Promise<Environment | undefined> {
    return this.store.findEnvironment(slug);
  }

  private async requireEnvironment(slug: string): Promise<Environment> {
    const environment = await this.store.findEnvironment(slug);
    if (!environment) throw new AccessError(`environment '${slug}' does not exist (see: importd env list)`);
    return environment;
  }

  /** Issues a key for the environment and returns it whole; it cannot be shown again. */
  async createKey(slug: string): Promise<string> {
    const environment = await this.requireEnvironment(slug);
    const secret = newSecret();
    return formatKey(secret, await this.store.insertKey(environment.id, hashSecret(secret)));
  }

  async listKeys(slug: string): Promise<KeyListing[]> {
    return this.store.listKeys((await this.requireEnvironment(slug)).id);
  }

  async revokeKey(keyId: number): Promise<void> {
    const outcome = await this.store.revokeKey(keyId);
    if (outcome === "already revoked") throw new AccessError(`key ${keyId} is already revoked`);
    if (outcome === "unknown") throw new AccessError(`key ${keyId} does not exist`);
  }

  /**
   * The environment id, if this very key passed for this environment and nothing was committed since; else
   * undefined, and `authenticate` decides. Synchronous: every request asks.
   */
  passedBefore(slug: string, headerValue: string | null): number | undefined {
    return headerValue === null ? undefined : this.passed?.current(passedKey(slug, headerValue));
  }

  /** The environment id the key grants access to, or undefined. Which check failed is never told. */
  async authenticate(slug: string, headerValue: string | null): Promise<number | undefined> {
    if (headerValue === null) return undefined;
    const check = () => this.check(slug, headerValue);
    return this.passed ? this.passed.get(passedKey(slug, headerValue), check) : check();
  }

  private async check(slug: string, headerValue: string): Promise<number | undefined> {
    const parsed = parseKey(headerValue);
    const row = parsed ? await this.store.findKey(parsed.keyId) : undefined;
    // The secret is hashed and compared even when the key is unknown, to keep timing flat.
    const matches = secretMatches(parsed?.secret ?? headerValue, row?.secretHash);
    if (!row || !matches || row.revokedAt !== null || row.slug !== slug) return undefined;
    return row.environmentId;
  }
}
