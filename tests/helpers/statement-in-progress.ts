import { testSql, type TestSql } from "./sql";

/** What a stand-in's statement ended as when PostgreSQL ended its connection (57P01, or the connection gone). */
export const lostConnection = "ended by PostgreSQL";

/**
 * A connection named `applicationName` (as an importd instance names its own: "importd <id>") in the middle of
 * a statement, in a transaction that holds environment `lockEnvironment`'s row lock if given: `active`, as the
 * backend of an instance paused mid-statement is, never idle. It stands in for another instance's connection in
 * the liveness tests. Resolves once the statement runs; `ended` says how it ended ("finished", lostConnection,
 * or another error's code), `alive` whether its backend is still there.
 */
export async function statementInProgress(url: string, admin: TestSql, applicationName: string, lockEnvironment?: number) {
  const sql = testSql(url, { applicationName });
  const pid = await sql.pid();
  // One simple query, so that nothing more is sent after it fails.
  const lock = lockEnvironment === undefined ? "" : `SELECT id FROM environments WHERE id = ${lockEnvironment} FOR NO KEY UPDATE;`;
  const ended = sql.unsafe(`BEGIN; ${lock} SELECT pg_sleep(600)`).then(
    () => "finished",
    (error: { code?: string; message?: string }) =>
      error.code === "57P01" || /^Connection terminated/.test(error.message ?? "") ? lostConnection : (error.code ?? String(error)),
  );
  for (let tries = 0; (await admin`SELECT state FROM pg_stat_activity WHERE pid = ${pid}`)[0]?.state !== "active"; tries++) {
    if (tries > 200) throw new Error("the stand-in never started its statement");
    await Bun.sleep(10);
  }
  return {
    ended,
    alive: async () => (await admin`SELECT 1 FROM pg_stat_activity WHERE pid = ${pid}`).length === 1,
    end: () => sql.end(),
  };
}
