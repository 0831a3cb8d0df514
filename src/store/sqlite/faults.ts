import { StorageConflict, StorageFull, StorageUnavailable } from "../errors";

/**
 * The one place that reads SQLite's error codes: a full disk, a database that cannot be used just now
 * (another connection held the lock past the busy timeout, an I/O error) and a broken constraint become the
 * store's named faults. Anything else is a bug and stays as it is.
 */
export function translateFault(error: unknown): unknown {
  const code = (error as { code?: unknown })?.code;
  if (typeof code !== "string" || !code.startsWith("SQLITE_")) return error;
  const message = (error as Error).message ?? code;
  if (code.startsWith("SQLITE_FULL")) return new StorageFull(message, { cause: error });
  if (/^SQLITE_(BUSY|LOCKED|IOERR|CANTOPEN|PROTOCOL)/.test(code)) return new StorageUnavailable(message, { cause: error });
  if (code.startsWith("SQLITE_CONSTRAINT")) return new StorageConflict(message, { cause: error });
  return error;
}

/** Runs `fn` now (the driver is synchronous) and answers as a port does: a Promise, faults translated. */
export function answer<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (error) {
    return Promise.reject(translateFault(error));
  }
}
