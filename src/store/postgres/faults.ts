import { DatabaseError, StorageConflict, StorageFull, StorageUnavailable } from "../errors";
import { redactedUrl } from "./connection";

/**
 * The one place that reads PostgreSQL's error codes (SQLSTATE) and the driver's connection errors: they become
 * the store's named faults. Anything else is a bug and stays as it is.
 */
export function translateFault(error: unknown): unknown {
  const driverError = withCode(error);
  if (!driverError) return error;
  const { code } = driverError;
  const message = driverError.message ?? code;
  if (code === "53100") return new StorageFull(`the database server's disk is full: ${message}`, { cause: error });
  if (retryable(code)) return new StorageConflict(message, { cause: error });
  if (unavailable(code)) return new StorageUnavailable(`the database cannot be used just now: ${message}`, { cause: error });
  if (code.startsWith("23")) return new StorageConflict(message, { cause: error });
  return error;
}

/**
 * The driver's error, with its SQLSTATE or connection error code: Drizzle wraps it ("Failed query: …") and
 * keeps it as the cause.
 */
export function withCode(error: unknown): (Error & { code: string }) | undefined {
  for (let current = error, depth = 0; current && depth < 5; current = (current as Error).cause, depth++) {
    if (typeof (current as { code?: unknown }).code === "string") return current as Error & { code: string };
  }
  return undefined;
}

/** A deadlock or a serialization failure: the transaction may simply be run again. */
const retryable = (code: string) => code === "40P01" || code === "40001";

// Connection exceptions (08), an administrator's or a crash's shutdown (57P01–57P03), a session ended for
// idling in a transaction (25P03), and the driver's own connection errors: the connection is gone.
const connectionEnded = (code: string) =>
  code.startsWith("08") ||
  code.startsWith("57P") ||
  code === "25P03" ||
  /^(CONNECTION_|CONNECT_TIMEOUT|E(CONNREFUSED|CONNRESET|PIPE|HOSTUNREACH|NETUNREACH|TIMEDOUT|AI_AGAIN)|ENOTFOUND)/.test(code);

// Those; insufficient resources other than a full disk (53); and a database that refuses new connections just
// now: closed to connections (55000, "not currently accepting connections"), gone (3D000) or refusing the
// credentials (28). At start-up these are reported as they are (connectionProblem); later, a request meeting
// one is answered 503, not 500.
const unavailable = (code: string) => connectionEnded(code) || code.startsWith("53") || code === "55000" || code === "3D000" || code.startsWith("28");

/** Whether `error` ended (or never opened) the connection its statement was sent on. */
export function endedTheConnection(error: unknown): boolean {
  const code = withCode(error)?.code;
  return code !== undefined && connectionEnded(code);
}

/** Runs `fn`, faults translated. */
export async function answer<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw translateFault(error);
  }
}

/**
 * Runs `fn`, a whole transaction, faults translated; a deadlock or serialization failure runs it again, up to
 * three times (never a statement inside a transaction: the transaction it was in is aborted).
 */
export async function retried<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      const code = withCode(error)?.code;
      if (code && retryable(code) && attempt < 3) continue;
      throw translateFault(error);
    }
  }
}

/** A start-up failure as one line an operator can act on, never with the password. */
export function connectionProblem(error: unknown, url: string): Error {
  const code = withCode(error)?.code;
  const where = redactedUrl(url);
  const message = (error as Error)?.message ?? String(error);
  if (code === "28P01" || code === "28000") return new DatabaseError(`cannot log in to ${where}: ${message}. Check the user and password in --database-url (IMPORTD_DATABASE_URL).`);
  if (code === "3D000") return new DatabaseError(`${where}: ${message}. Create it first (createdb, or CREATE DATABASE), or correct --database-url.`);
  if (typeof code === "string" && unavailable(code)) return new DatabaseError(`cannot reach the database ${where}: ${message}. Is PostgreSQL running there, and does it accept connections from this host?`);
  return error as Error;
}
