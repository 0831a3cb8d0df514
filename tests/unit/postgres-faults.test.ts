import { describe, expect, test } from "bun:test";
import { DrizzleQueryError } from "drizzle-orm";
import pg from "pg";
import { StorageConflict, StorageFull, StorageUnavailable } from "../../src/store/errors";
import { retried, translateFault } from "../../src/store/postgres/faults";

// The shapes pg gives its errors: a server's error is a DatabaseError with the SQLSTATE in .code; a socket's carries
// the system's code; pg's own connection errors carry no code at all, only their message.
const serverError = (code: string, severity = "ERROR") => Object.assign(new pg.DatabaseError(`error ${code}`, 0, "error"), { code, severity });
const socketError = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code });

describe("PostgreSQL faults", () => {
  test.each([
    ["53100", StorageFull],
    ["57P01", StorageUnavailable], // terminating connection due to administrator command
    ["08006", StorageUnavailable],
    ["25P03", StorageUnavailable], // idle_in_transaction_session_timeout
    ["57014", StorageUnavailable], // canceled: statement_timeout, or an administrator
    ["55000", StorageUnavailable], // database "x" is not currently accepting connections
    ["3D000", StorageUnavailable], // database "x" does not exist (dropped under a running server)
    ["28P01", StorageUnavailable], // password authentication failed (changed under a running server)
    ["40P01", StorageConflict],
    ["23505", StorageConflict],
  ])("the server's %s becomes %p, also wrapped by Drizzle ('Failed query: …', the driver's error as its cause)", (code, kind) => {
    expect(translateFault(serverError(code))).toBeInstanceOf(kind);
    expect(translateFault(new DrizzleQueryError("select 1", [], serverError(code)))).toBeInstanceOf(kind);
  });

  test.each(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "ENOTFOUND", "EHOSTUNREACH"])("a socket's %s is StorageUnavailable", (code) => {
    expect(translateFault(socketError(code))).toBeInstanceOf(StorageUnavailable);
  });

  test.each([
    "Connection terminated unexpectedly",
    "Connection terminated",
    "Connection terminated due to connection timeout",
    "timeout exceeded when trying to connect",
    "Query read timeout",
    "Client has encountered a connection error and is not queryable",
    "Client was closed and is not queryable",
  ])("pg's codeless '%s' is StorageUnavailable, its message kept, also wrapped by Drizzle", (message) => {
    const fault = translateFault(new Error(message));
    expect(fault).toBeInstanceOf(StorageUnavailable);
    expect((fault as Error).message).toContain(message);
    expect(translateFault(new DrizzleQueryError("select 1", [], new Error(message)))).toBeInstanceOf(StorageUnavailable);
  });

  test("anything else stays as it is: a bug, not a storage fault", () => {
    const bug = new TypeError("undefined is not a function");
    expect(translateFault(bug)).toBe(bug);
    const syntax = serverError("42601");
    expect(translateFault(syntax)).toBe(syntax);
    const unknown = new Error("Connection refused by the moon");
    expect(translateFault(unknown)).toBe(unknown);
  });

  test("a deadlock runs the transaction again, up to three times", async () => {
    let runs = 0;
    expect(await retried(async () => (++runs < 3 ? Promise.reject(new DrizzleQueryError("x", [], serverError("40P01"))) : "done"))).toBe("done");
    expect(runs).toBe(3);
    runs = 0;
    await expect(retried(async () => (++runs, Promise.reject(serverError("40001"))))).rejects.toBeInstanceOf(StorageConflict);
    expect(runs).toBe(3);
  });
});
