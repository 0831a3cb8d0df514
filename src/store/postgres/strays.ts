/**
 * postgres.js 3.4 lets some errors of a connection that PostgreSQL or the network has just closed escape as
 * uncaught exceptions or unhandled rejections (a FATAL 57P01 "terminating connection due to administrator
 * command" or an ECONNRESET that no query was waiting for; a TypeError writing to the closed socket) — each of
 * which would end the whole process, on every failover. The queries of that connection fail with the error
 * too, and that is where importd handles it (a 503, a run retried); the stray copy is dropped here. Anything
 * else is thrown on, and ends the process (or worker thread) as before.
 */
let installed = false;

export function dropDriverStrays(): void {
  if (installed) return;
  installed = true;
  const handle = (error: unknown) => {
    if (!isStray(error)) throw error;
  };
  process.on("uncaughtException", handle);
  process.on("unhandledRejection", handle);
}

const lostConnectionCodes = /^(57P0[123]|08...|25P03|ECONNRESET|EPIPE|ETIMEDOUT|CONNECTION_CLOSED|CONNECTION_ENDED|CONNECTION_DESTROYED)$/;

export function isStray(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  if (typeof code === "string" && lostConnectionCodes.test(code)) return true;
  // Writing to the socket of a connection that has closed.
  const stack = (error as Error)?.stack ?? "";
  return error instanceof TypeError && stack.includes("postgres/src/connection.js") && stack.includes("nextWrite");
}
