import { describe, expect, test } from "bun:test";
import { DrizzleQueryError } from "drizzle-orm";
import { StorageConflict, StorageFull, StorageUnavailable } from "../../src/store/errors";
import { retried, translateFault } from "../../src/store/postgres/faults";
import { isStray } from "../../src/store/postgres/strays";

const driverError = (code: string, message = `error ${code}`) => Object.assign(new Error(message), { code });

describe("PostgreSQL faults", () => {
  test.each([
    ["53100", StorageFull],
    ["57P01", StorageUnavailable],
    ["08006", StorageUnavailable],
    ["25P03", StorageUnavailable],
    ["ECONNREFUSED", StorageUnavailable],
    ["CONNECTION_CLOSED", StorageUnavailable],
    ["55000", StorageUnavailable], // database "x" is not currently accepting connections
    ["3D000", StorageUnavailable], // database "x" does not exist (dropped under a running server)
    ["28P01", StorageUnavailable], // password authentication failed (changed under a running server)
    ["40P01", StorageConflict],
    ["23505", StorageConflict],
  ])("%s becomes %p, also wrapped by Drizzle ('Failed query: …', the driver's error as its cause)", (code, kind) => {
    expect(translateFault(driverError(code))).toBeInstanceOf(kind);
    const wrapped = new DrizzleQueryError("select 1", [], driverError(code));
    expect(translateFault(wrapped)).toBeInstanceOf(kind);
  });

  test("anything else stays as it is: a bug, not a storage fault", () => {
    const bug = new TypeError("undefined is not a function");
    expect(translateFault(bug)).toBe(bug);
    const syntax = driverError("42601");
    expect(translateFault(syntax)).toBe(syntax);
  });

  test("a deadlock runs the transaction again, up to three times", async () => {
    let runs = 0;
    expect(await retried(async () => (++runs < 3 ? Promise.reject(new DrizzleQueryError("x", [], driverError("40P01"))) : "done"))).toBe("done");
    expect(runs).toBe(3);
    runs = 0;
    await expect(retried(async () => (++runs, Promise.reject(driverError("40001"))))).rejects.toBeInstanceOf(StorageConflict);
    expect(runs).toBe(3);
  });

  test("the driver's strays of a lost connection are told apart from other uncaught errors", () => {
    expect(isStray(driverError("57P01"))).toBe(true);
    expect(isStray(driverError("ECONNRESET"))).toBe(true);
    expect(isStray(new TypeError("x"))).toBe(false);
    expect(isStray(driverError("42601"))).toBe(false);
    expect(isStray(new Error("anything"))).toBe(false);
  });
});
