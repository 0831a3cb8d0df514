import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { testPassword, requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { importd, spawnServer, type ServerProcess } from "../helpers/process";
import { tempDir } from "../helpers/server";

// A password given as ?password= in --database-url, on a real PostgreSQL: the server logs in with it, and neither
// its start-up lines nor a refused login show it (DECISIONS 15).

if (requirePostgres("a ?password= database URL on PostgreSQL")) {
  const cleanups: Array<() => Promise<void> | void> = [];
  let server: ServerProcess | undefined;
  afterAll(async () => {
    server?.proc.kill("SIGKILL");
    for (const cleanup of cleanups) await cleanup();
  });

  test("the server logs in with ?password= and shows it nowhere; a wrong one is refused without showing it", async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const dataDir = tempDir("importd-pg-url-");
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const url = new URL(database.url);
    url.password = "";
    url.searchParams.set("password", testPassword);
    const inQuery = url.toString();

    server = await spawnServer(dataDir, ["--database-url", inQuery]);
    const shown = server.stdout.join("\n");
    expect(shown).toContain("database: postgres://importd_test@127.0.0.1:");
    expect(shown).toContain("password=***");
    server.proc.kill("SIGTERM");
    await server.proc.exited;
    expect(`${shown}\n${await server.stderr}`).not.toContain(testPassword);

    url.searchParams.set("password", "wrong-pw-hunter2");
    const refused = await importd(["serve", "--port", "0", "--data-dir", dataDir, "--database-url", url.toString()]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("cannot log in to postgres://importd_test@");
    expect(`${refused.stdout}\n${refused.stderr}`).not.toContain("hunter2");
  }, 60_000);
}
