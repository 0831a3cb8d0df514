import { DatabaseError, StorageConflict, StorageFull, StorageUnavailable } from "../errors";
import { redactedUrl, withoutSecrets } from "./url";

/**
 * The one place that reads the driver's errors (a SQLSTATE or a socket's code in `.code`; pg's own connection errors,
 * which have none, by their message) and makes them the store's named faults. Anything else is a bug, left as it is.
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
  /^The server does not support SSL connections$/, // sslmode=require against a server without TLS
];

// Named as the driver's connection errors are, for pg's codeless ones.
const lostConnectionCode = "CONNECTION_LOST";

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

// A connection that ended, never opened or gave no answer in time (08, 57P01–57P03, 25P03 idle in transaction, the
// socket's and pg's own errors); a statement canceled (57014); resources short (53); a database that refuses
// connections just now: closed (55000), gone (3D000), credentials refused (28). A request meeting one gets a 503.
const unavailable = (code: string) =>
  code === lostConnectionCode ||
  certificateRefused(code) ||
  /^(08|57P|53|28)/.test(code) ||
  ["25P03", "57014", "55000", "3D000"].includes(code) ||
  /^E(CONNREFUSED|CONNRESET|CONNABORTED|PIPE|HOSTUNREACH|NETUNREACH|TIMEDOUT|AI_AGAIN|NOTFOUND)$/.test(code);

/**
 * Runs `fn`, a whole transaction, faults translated; a deadlock or serialization failure runs it again, up to
 * `attempts` times (never a statement inside a transaction: the transaction it was in is aborted).
 */
export async function retried<T>(fn: () => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      const code = faultCode(error);
      if (code && retryable(code) && attempt < attempts) continue;
      throw translateFault(error);
    }
  }
}

/** Runs `fn`, faults translated. */
export const answer = <T>(fn: () => Promise<T>): Promise<T> => retried(fn, 1);

// The database server's TLS certificate, refused (sslmode=verify-ca or verify-full).
const certificateRefused = (code: string) => /^(UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED|SELF_SIGNED_CERT|CERT_|ERR_TLS_CERT)/.test(code);

/** A start-up failure as one line an operator can act on, never with the password. */
export function connectionProblem(error: unknown, url: string): Error {
  const fault: { code?: string; message: string } = driverFault(error) ?? { message: (error as Error)?.message ?? String(error) };
  const { code } = fault;
  const message = withoutSecrets(fault.message, url);
  const where = redactedUrl(url);
  if (code === "28P01" || code === "28000") return new DatabaseError(`cannot log in to ${where}: ${message}. Check the user and password in --database-url (IMPORTD_DATABASE_URL).`);
  if (code === "3D000") return new DatabaseError(`${where}: ${message}. Create it first (createdb, or CREATE DATABASE), or correct --database-url.`);
  if (code !== undefined && certificateRefused(code)) {
    return new DatabaseError(`cannot trust the TLS certificate of the database server ${where} (${code}: ${message}): give the authority that signed it as sslrootcert=<file> in --database-url, and connect by a name it has (sslmode=verify-full)`);
  }
  if (typeof code === "string" && unavailable(code)) return new DatabaseError(`cannot reach the database ${where}: ${message}. Is PostgreSQL running there, and does it accept connections from this host?`);
  // Anything else as it is, unless its message or stack repeats a password.
  if (message !== fault.message || withoutSecrets(String((error as Error)?.stack ?? ""), url) !== String((error as Error)?.stack ?? "")) return new DatabaseError(`${where}: ${message}`);
  return error as Error;
}
