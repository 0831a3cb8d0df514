import { isRetained } from "./job-row";
import type { CommitMark, CommitWatch, Job, JobReads } from "./ports";

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

  /** `key`'s value if it is remembered and nothing was committed since it was read. Synchronous: the hot path. */
  current(key: K): V | undefined {
    if (!this.commits.unchangedSince(this.since)) {
      this.entries.clear();
      this.since = this.commits.mark();
    }
    return this.entries.get(key);
  }

  /** `key`'s value: remembered, or `read` (and remembered when found and nothing was committed meanwhile). */
  async get(key: K, read: () => Promise<V | undefined>): Promise<V | undefined> {
    const remembered = this.current(key);
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

/** The store's job lookup, answered from memory while nothing was committed (retention is checked every time). */
export function cachedJobs(reads: JobReads, commits: CommitWatch): JobReads {
  const jobs = new CommittedReads<string, Job>(commits);
  const retained = (job: Job | undefined, retainedSince: string) => (job && isRetained(job, retainedSince) ? job : undefined);
  // Everything but find is the store's own.
  return Object.assign(Object.create(reads) as JobReads, {
    find: (environmentId: number, id: number, retainedSince: string) => {
      const key = `${environmentId}/${id}`;
      const remembered = jobs.current(key);
      if (remembered) return Promise.resolve(retained(remembered, retainedSince));
      return jobs.get(key, () => reads.find(environmentId, id, retainedSince)).then((job) => retained(job, retainedSince));
    },
  });
}
