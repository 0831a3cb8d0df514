/** A read of a job that held polls share (see JobWaits.read): `startedAt` is unset until it has begun. */
type SharedRead = { startedAt?: number; result: Promise<unknown> };

/**
 * Long polls (DECISIONS 7, `Prefer: wait`): the status requests held until their job ends. A held poll costs an
 * entry here and its timer; it is woken when this process finishes or cancels the job, when another instance
 * says it has (the store's notifications), or when notifications may have been missed (then every held poll
 * reads its job again, and waits on if it has time left).
 *
 * The polls a wake-up wakes read their job once between them, not once each: 2,000 polls of one job, woken together
 * on PostgreSQL, took 2,000 connections' turns, and some waited past the pool's limit (503).
 */
export class JobWaits {
  private readonly waiting = new Map<number, Set<() => void>>();
  private readonly reads = new Map<string, SharedRead>();
  /** Counts reads begun: a moment is the count when something happened. */
  private moment = 0;
  /** The server is stopping: polls are answered as they are, none waits any more. */
  stopped = false;

  /** Held polls, for the metrics and tests. */
  get size(): number {
    let count = 0;
    for (const waiters of this.waiting.values()) count += waiters.size;
    return count;
  }

  /**
   * A wait for job `jobId`, registered at once (so that an end between this call and the caller's read of the
   * job is not missed): `done` settles when the job may have ended or `ms` have passed; `cancel` lets go of it.
   * `since`: the moment of the registration, for read().
   */
  register(jobId: number, ms: number): { done: Promise<void>; cancel(): void; since: number } {
    const since = this.moment;
    if (this.stopped || ms <= 0) return { done: Promise.resolve(), cancel() {}, since };
    let waiters = this.waiting.get(jobId);
    if (!waiters) this.waiting.set(jobId, (waiters = new Set()));
    let timer: ReturnType<typeof setTimeout> | undefined;
    let wake!: () => void;
    const done = new Promise<void>((resolve) => {
      wake = () => {
        clearTimeout(timer);
        waiters.delete(wake);
        if (waiters.size === 0 && this.waiting.get(jobId) === waiters) this.waiting.delete(jobId);
        resolve();
      };
    });
    waiters.add(wake);
    timer = setTimeout(wake, ms);
    return { done, cancel: wake, since };
  }

  /**
   * Reads a job for a held poll registered at `since` (register's): `read()`, or the result of a read of the same
   * `key` that the poll may share. It may share a read that began after its registration (what that read saw, the
   * poll's wait would otherwise have been woken for), or one that has not begun yet: a read begins on the next turn
   * of the event loop, by when every poll that one wake-up woke has registered again and joined it.
   */
  read<T>(key: string, since: number, read: () => Promise<T>): Promise<T> {
    const shared = this.reads.get(key);
    if (shared && (shared.startedAt === undefined || shared.startedAt > since)) return shared.result as Promise<T>;
    const entry: SharedRead = { result: Promise.resolve() };
    const result = new Promise<T>((resolve, reject) =>
      setImmediate(() => {
        entry.startedAt = ++this.moment;
        read().then(resolve, reject);
      }),
    ).finally(() => {
      if (this.reads.get(key) === entry) this.reads.delete(key);
    });
    entry.result = result;
    this.reads.set(key, entry);
    return result;
  }

  /** These jobs have ended (or may have): their polls read them again. */
  finished(jobIds: Iterable<number>): void {
    for (const jobId of jobIds) for (const wake of [...(this.waiting.get(jobId) ?? [])]) wake();
  }

  /** Notifications may have been lost: every held poll reads its job again. */
  wakeAll(): void {
    this.finished([...this.waiting.keys()]);
  }

  /** The server stops: every held poll is answered now, and no new one waits. */
  stop(): void {
    this.stopped = true;
    this.wakeAll();
  }
}

/** Longest wait a poll may ask for, in seconds (a larger wish gets this). */
export const maxWaitSeconds = 60;

// RFC 7240's grammar, for the document: a token (RFC 9110's tchar), a word (a token or a quoted string), a
// preference with its `;` parameters. White space is written only before what it may precede, never on both sides
// of an optional part: a validator that backtracks finds one way to match, not 2^n (`, , , …` took seconds).
const token = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const word = String.raw`(?:${token}|"(?:[\t !#-\[\]-~]|\\[\t -~])*")`;
const parameter = String.raw`${token}(?:[ \t]*=[ \t]*${word})?`;
const preference = String.raw`${parameter}(?:[ \t]*;(?:[ \t]*${parameter})?)*`;

/**
 * A Prefer header as RFC 7240 writes it: preferences separated by commas (empty elements allowed, as RFC 9110's
 * lists allow them), each `token [= word]` with `;` parameters; `wait=5`, `respond-async, wait=5`, `WAIT = "5"`.
 * preferredWait reads a wait from every such header that has one; a header outside it is not refused (RFC 7240: a
 * preference the server does not understand is ignored).
 */
export const preferPattern = String.raw`^(?:[ \t]*${preference})?(?:[ \t]*,(?:[ \t]*${preference})?)*[ \t]*$`;

/**
 * The `wait` preference of a Prefer header (RFC 7240), capped at maxWaitSeconds; undefined without one (or with
 * one that is not a whole number of seconds, which RFC 7240 says to ignore). Any run of digits is a number of
 * seconds, however long: a wish beyond the cap gets the cap, never "no wait" (Number() of 20 digits is 1e20, still
 * above it).
 */
export function preferredWait(prefer: string | null | undefined): number | undefined {
  if (!prefer) return undefined;
  for (const preference of prefer.split(",")) {
    const match = /^\s*wait\s*=\s*(?:(\d+)|"(\d+)")\s*(;.*)?$/i.exec(preference);
    if (match) return Math.min(Number(match[1] ?? match[2]), maxWaitSeconds);
  }
  return undefined;
}
