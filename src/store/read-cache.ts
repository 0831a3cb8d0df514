import { isRetained } from "./job-row";
import type { AccessStore, CommitMark, CommitWatch, Job, JobReads, StoredKey } from "./ports";

/**
 * Answers from memory while the store says nothing was committed since: status polls and the key check of
 * every request read the same few rows again and again. The first read after any commit (a key revoked with
 * the CLI, a job finished by a worker, anything) goes to the database, so nothing is ever answered stale.
 */
export class CommittedReads<K, V> {
  private readonly entries = new Map<K, V>();
  private since: CommitMark;

  constructor(
    private readonly commits: CommitWatch,
    // Bounded, so that a client walking through ids cannot grow it; a full cache only stops caching.
    private readonly maxEntries = 10_000,
  ) {
    this.since = commits.mark();
  }

  /** `key`'s value: remembered, or `read` (and remembered when found and nothing was committed meanwhile). */
  async get(key: K, read: () => Promise<V | undefined>): Promise<V | undefined> {
    if (!this.commits.unchangedSince(this.since)) {
      this.entries.clear();
      this.since = this.commits.mark();
    }
    const remembered = this.entries.get(key);
    if (remembered !== undefined) return remembered;
    // The mark was taken before the read: a commit in between makes unchangedSince false, and the value is not kept.
    const since = this.since;
    const value = await read();
    if (value !== undefined && since === this.since && this.commits.unchangedSince(since) && this.entries.size < this.maxEntries) {
      this.entries.set(key, value);
    }
    return value;
  }
}

/** The store's key lookup, answered from memory while nothing was committed. */
export function cachedKeys(store: AccessStore, commits: CommitWatch): AccessStore {
  const keys = new CommittedReads<number, StoredKey>(commits);
  return Object.assign(Object.create(store) as AccessStore, {
    findKey: (keyId: number) => keys.get(keyId, () => store.findKey(keyId)),
  });
}

/** The store's job lookup, answered from memory while nothing was committed (retention is checked every time). */
export function cachedJobs(reads: JobReads, commits: CommitWatch): JobReads {
  const jobs = new CommittedReads<string, Job>(commits);
  return Object.assign(Object.create(reads) as JobReads, {
    find: async (environmentId: number, id: number, retainedSince: string) => {
      const job = await jobs.get(`${environmentId}/${id}`, () => reads.find(environmentId, id, retainedSince));
      return job && isRetained(job, retainedSince) ? job : undefined;
    },
  });
}
