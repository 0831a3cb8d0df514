import postgres from "postgres";

/** What a stand-in's statement ended as when PostgreSQL ended its connection (the driver says 57P01 or CONNECTION_CLOSED). */
export const lostConnection = "ended by PostgreSQL";

/**
 * A connection named `applicationName` (as an importd instance names its own: "importd <id>") in the middle of
 * a statement, in a transaction that holds environment `lockEnvironment`'s row lock if given: `active`, as the
 * backend of an instance paused mid-statement is, never idle. It stands in for another instance's connection in
 * the liveness tests. Resolves once the statement runs; `ended` says how it ended ("finished", lostConnection,
 * or another error's code), `alive` whether its backend is still there.
 */
export async function statementInProgress(url: string, admin: postgres.Sql, applicationName: string, lockEnvironment?: number) {
  const sql = postgres(url, { max: 1, onnotice: () => {}, connection: { application_name: applicationName } });
  const pid = (await sql`SELECT pg_backend_pid() AS pid`)[0]!.pid as number;
  // One simple query, so that nothing more is sent after it fails (postgres.js's begin() would send a ROLLBACK on
  // the ended connection, which throws from a timer).
  const lock = lockEnvironment === undefined ? "" : `SELECT id FROM environments WHERE id = ${lockEnvironment} FOR NO KEY UPDATE;`;
  const ended = sql.unsafe(`BEGIN; ${lock} SELECT pg_sleep(600)`).then(
    () => "finished",
    (error: { code?: string }) => (error.code === "57P01" || error.code === "CONNECTION_CLOSED" ? lostConnection : (error.code ?? String(error))),
  );
  for (let tries = 0; (await admin`SELECT state FROM pg_stat_activity WHERE pid = ${pid}`)[0]?.state !== "active"; tries++) {
    if (tries > 200) throw new Error("the stand-in never started its statement");
    await Bun.sleep(10);
  }
  return {
    ended,
    alive: async () => (await admin`SELECT 1 FROM pg_stat_activity WHERE pid = ${pid}`).length === 1,
    end: () => sql.end({ timeout: 0 }),
  };
}
