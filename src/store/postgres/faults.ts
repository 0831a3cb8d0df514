import { DatabaseError, StorageConflict, StorageFull, StorageUnavailable } from "../errors";
import { redactedUrl } from "./connection";

/**
 * The one place that reads the driver's errors: PostgreSQL's SQLSTATE in `.code`, a socket's error code (ECONNRESET,
 * …), and the codeless errors pg raises itself when a connection is lost or a deadline passes, told by their message.
 * They become the store's named faults. Anything else is a bug and stays as it is.
 */
export function translateFault(error: unknown): unknown {
  const fault = driverFault(error);
  if (!fault) return error;
  const { code, message } = fault;
  if (code === "53100") return new StorageFull(`the database server's disk is full: ${message}`, { cause: error });
  if (retryable(code)) return new StorageConflict(message, { cause: error });
  if (unavailable(code)) return new StorageUnavailable(`the database cannot be used just now: ${message}`, { cause: error });
  if (code.startsWith("23")) return new StorageConflict(message, { cause: error });
  return error;
}

// pg's own errors for a connection that ended, never opened or did not answer in time: they carry no code.
const lostConnectionMessages = [
  /^Connection terminated/, // "… unexpectedly", "… due to connection timeout", and end() under a statement
  /^timeout exceeded when trying to connect$/, // no free connection in the pool in time
  /^Query read timeout$/, // the statement deadline
  /^Client has encountered a connection error and is not queryable$/,
  /^Client was closed and is not queryable$/,
  /^COPY had no answer within/, // the bulk deadline (connection.ts)
];

/** Named as the driver's connection errors are, for pg's codeless ones. */
export const lostConnectionCode = "CONNECTION_LOST";

/**
 * The driver's error, looking through Drizzle's wrapping ("Failed query: …", the driver's error as its cause): its
 * SQLSTATE or connection error code (lostConnectionCode for pg's codeless connection errors), and its message.
 */
function driverFault(error: unknown): { code: string; message: string } | undefined {
  for (let current = error, depth = 0; current && depth < 5; current = (current as Error).cause, depth++) {
    const { code, message } = current as { code?: unknown; message?: unknown };
    if (typeof code === "string") return { code, message: String(message ?? code) };
    if (typeof message === "string" && lostConnectionMessages.some((pattern) => pattern.test(message))) return { code: lostConnectionCode, message };
  }
  return undefined;
}

/** The SQLSTATE or connection error code of the driver's error in `error`, if there is one. */
export const faultCode = (error: unknown) => driverFault(error)?.code;

/** A deadlock or a serialization failure: the transaction may simply be run again. */
const retryable = (code: string) => code === "40P01" || code === "40001";

// Connection exceptions (08), an administrator's or a crash's shutdown (57P01–57P03), a session ended for idling in a
// transaction (25P03), and the socket's and pg's own connection errors: the connection is gone.
const connectionEnded = (code: string) =>
  code === lostConnectionCode ||
  code.startsWith("08") ||
  code.startsWith("57P") ||
  code === "25P03" ||
  /^E(CONNREFUSED|CONNRESET|CONNABORTED|PIPE|HOSTUNREACH|NETUNREACH|TIMEDOUT|AI_AGAIN|NOTFOUND)$/.test(code);

// Those; a statement canceled (57014: by an administrator, or a server-side statement_timeout); insufficient
// resources other than a full disk (53); and a database that refuses new connections just now: closed to connections
// (55000, "not currently accepting connections"), gone (3D000) or refusing the credentials (28). At start-up these are
// reported as they are (connectionProblem); later, a request meeting one is answered 503, not 500.
const unavailable = (code: string) =>
  connectionEnded(code) || code === "57014" || code.startsWith("53") || code === "55000" || code === "3D000" || code.startsWith("28");

/** Whether `error` ended (or never opened) the connection its statement was sent on. */
export function endedTheConnection(error: unknown): boolean {
  const code = faultCode(error);
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
 * Runs `fn`, a whole transaction, faults translated; a deadlock or serialization failure runs it again, up to three
 * times (never a statement inside a transaction: the transaction it was in is aborted).
 */
export async function retried<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      const code = faultCode(error);
      if (code && retryable(code) && attempt < 3) continue;
      throw translateFault(error);
    }
  }
}

/** A start-up failure as one line an operator can act on, never with the password. */
export function connectionProblem(error: unknown, url: string): Error {
  const { code, message } = driverFault(error) ?? { message: (error as Error)?.message ?? String(error) };
  const where = redactedUrl(url);
  if (code === "28P01" || code === "28000") return new DatabaseError(`cannot log in to ${where}: ${message}. Check the user and password in --database-url (IMPORTD_DATABASE_URL).`);
  if (code === "3D000") return new DatabaseError(`${where}: ${message}. Create it first (createdb, or CREATE DATABASE), or correct --database-url.`);
  if (typeof code === "string" && unavailable(code)) return new DatabaseError(`cannot reach the database ${where}: ${message}. Is PostgreSQL running there, and does it accept connections from this host?`);
  return error as Error;
}
