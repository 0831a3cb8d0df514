/**
 * Waits until `read` gives a value that `holds` (by default: any truthy value) and returns it; throws after
 * `deadlineMs`, saying what it waited for and the last value it saw. The one way a test waits for something that
 * happens elsewhere (a server, a thread, a browser): a loop that runs out of time and falls through would let the
 * test go on as if it had happened. graphile/worker's `sleepUntil` does the same.
 */
export async function until<T>(
  read: () => T | Promise<T>,
  { what, deadlineMs = 10_000, holds = (value: T) => Boolean(value), everyMs = 50 }: { what: string; deadlineMs?: number; holds?: (value: T) => boolean; everyMs?: number },
): Promise<T> {
  const startedAt = Date.now();
  for (;;) {
    const value = await read();
    if (holds(value)) return value;
    if (Date.now() - startedAt > deadlineMs) {
      throw new Error(`waited ${deadlineMs} ms for ${what}, in vain; last seen: ${shown(value)}`);
    }
    await Bun.sleep(everyMs);
  }
}

/** `promise`'s value, or an error after `deadlineMs` saying what it was waiting for: an event awaited, with a bound. */
export async function within<T>(promise: Promise<T>, { what, deadlineMs = 10_000 }: { what: string; deadlineMs?: number }): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`waited ${deadlineMs} ms for ${what}, in vain`)), deadlineMs)));
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

const shown = (value: unknown) => {
  try {
    return (JSON.stringify(value) ?? String(value)).slice(0, 500);
  } catch {
    return String(value);
  }
};
