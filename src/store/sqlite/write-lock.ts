/**
 * Takes turns between this process's threads for SQLite's one write lock. A thread that finds SQLite's lock
 * taken is made to retry by its busy handler, sleeping 1, 2, 5, 10, 15… ms between tries: with one thread
 * committing intakes and another applying jobs, a burst of small transactions spent most of its time in
 * those sleeps. Threads that share a WriteLock wait on it instead, and the releasing thread wakes the next
 * one at once.
 *
 * It only orders the process's own writers: SQLite's locking still guards the data. So a writer in another
 * process (the CLI) is waited for as before, and a holder that never releases (its thread died; the pool
 * frees its turn, see `releaseFor`) costs at most `maxWaitMs` before the waiter goes ahead anyway.
 */
export class WriteLock {
  private readonly word: Int32Array;

  /**
   * `owner`: a number unique to the thread among those sharing `buffer`, above 0.
   * `maxWaitMs`: how long to wait for a turn before going ahead and leaving it to SQLite.
   */
  constructor(
    buffer: SharedArrayBuffer,
    private readonly owner: number,
    private readonly maxWaitMs = 60_000,
  ) {
    if (owner <= 0) throw new RangeError("a WriteLock owner is a number above 0");
    this.word = new Int32Array(buffer);
  }

  /** The memory the threads share: pass it to each, with an owner number of its own. */
  static sharedBuffer(): SharedArrayBuffer {
    return new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
  }

  /** Gives up the turn of a thread that died holding it (it can no longer release it itself). */
  static releaseFor(buffer: SharedArrayBuffer, owner: number): void {
    const word = new Int32Array(buffer);
    if (Atomics.compareExchange(word, 0, owner, 0) === owner) Atomics.notify(word, 0, 1);
  }

  /** Runs `fn` in this thread's turn: waits for the other threads' writes to end first. */
  run<T>(fn: () => T): T {
    this.acquire();
    try {
      return fn();
    } finally {
      this.release();
    }
  }

  /** Waits for this thread's turn; release() it after. Prefer run(). */
  acquire(): void {
    const deadline = performance.now() + this.maxWaitMs;
    for (;;) {
      const holder = Atomics.compareExchange(this.word, 0, 0, this.owner);
      if (holder === 0) return;
      const left = deadline - performance.now();
      // Waited long enough: take the turn over; SQLite's own lock (and busy timeout) still decides.
      if (left <= 0) return void Atomics.store(this.word, 0, this.owner);
      Atomics.wait(this.word, 0, holder, left);
    }
  }

  release(): void {
    // Only if still ours: a waiter that timed out may have taken the turn over.
    if (Atomics.compareExchange(this.word, 0, this.owner, 0) === this.owner) Atomics.notify(this.word, 0, 1);
  }
}
