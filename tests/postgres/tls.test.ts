import { afterAll, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseError } from "../../src/store/errors";
import { PostgresStore } from "../../src/store/postgres/store";
import { outboxRows } from "../../src/webhooks/outbox";
import { importd, spawnServer } from "../helpers/process";
import { postgresServer, requirePostgres, testPassword } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { tempDir } from "../helpers/server";
import { testAuthority } from "../helpers/tls";

// --database-url honours sslmode (require, verify-full) and sslrootcert, as libpq reads them (DECISIONS 9). The
// tests' PostgreSQL serves TLS with a certificate of the tests' own authority, for 127.0.0.1 and localhost.

if (requirePostgres("importd on PostgreSQL over TLS")) {
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });
  const withParams = (url: string, params: Record<string, string>) => {
    const parsed = new URL(url);
    for (const [name, value] of Object.entries(params)) parsed.searchParams.set(name, value);
    return parsed.toString();
  };
  async function database() {
    const made = await freshPostgresDatabase();
    cleanups.push(made.drop);
    return made.url;
  }
  const sslInUse = async (store: PostgresStore) => (await store.access.listEnvironments(), (await (store as unknown as { pool: { query(text: string): Promise<{ rows: Array<{ ssl: boolean }> }> } }).pool.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")).rows[0]!.ssl);

  test("sslmode=verify-full with sslrootcert: the connections are TLS, checked against the authority and the host name; an instance serves on it", async () => {
    const { caFile } = await postgresServer();
    const url = withParams(await database(), { sslmode: "verify-full", sslrootcert: caFile });
    const store = await PostgresStore.open(url, { outbox: outboxRows });
    cleanups.push(() => store.close());
    expect(await sslInUse(store)).toBe(true);

    const dir = tempDir("importd-pg-tls-");
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const server = await spawnServer(dir, ["--database-url", url]);
    cleanups.push(() => server.proc.kill("SIGKILL"));
    const response = await fetch(`${server.url}/default/v2/subareas`, {
      method: "POST",
      headers: { "api-key": server.firstRunKey!, "content-type": "application/json" },
      body: JSON.stringify([{ id: "north", name: "North" }]),
    });
    expect(response.status).toBe(202);
    server.proc.kill("SIGTERM");
    expect(await server.proc.exited).toBe(0);
  });

  test("sslmode=require encrypts without checking the certificate, as libpq does; without sslmode, no TLS", async () => {
    const plainUrl = await database();
    const required = await PostgresStore.open(withParams(plainUrl, { sslmode: "require" }), { outbox: outboxRows });
    cleanups.push(() => required.close());
    expect(await sslInUse(required)).toBe(true);
    const plain = await PostgresStore.open(plainUrl, { outbox: outboxRows });
    cleanups.push(() => plain.close());
    expect(await sslInUse(plain)).toBe(false);
  });

  test("verify-full against another authority, by a name the certificate lacks, or with a missing sslrootcert: one line without the password", async () => {
    const { caFile } = await postgresServer();
    const url = await database();
    const otherDir = tempDir("importd-pg-tls-other-");
    cleanups.push(() => rmSync(otherDir, { recursive: true, force: true }));
    const other = join(otherDir, "other-ca.crt");
    writeFileSync(other, (await testAuthority("somebody else")).cert);
    const cases: Array<[Record<string, string>, RegExp, string?]> = [
      [{ sslmode: "verify-full", sslrootcert: other }, /^cannot trust the TLS certificate of the database server postgres:\/\/importd_test:\*\*\*@127\.0\.0\.1:\d+\/\S+ \(/],
      [{ sslmode: "verify-full", sslrootcert: caFile }, /^cannot trust the TLS certificate of the database server \S+ \(ERR_TLS_CERT_ALTNAME_INVALID/, "127.0.0.2"],
      [{ sslmode: "verify-full", sslrootcert: join(other, "..", "nowhere.crt") }, /^--database-url names the file \S+nowhere\.crt, which cannot be read/],
    ];
    for (const [params, line, host] of cases) {
      const target = new URL(withParams(url, params));
      if (host) target.hostname = host;
      const refused = await PostgresStore.open(target.toString(), { outbox: outboxRows }).catch((error) => error);
      expect(refused).toBeInstanceOf(DatabaseError);
      expect(refused.message).toMatch(line);
      expect(refused.message).not.toContain(testPassword);
    }
    // The command line says it the same way, in one line, exit 1.
    const refused = await importd(["env", "list", "--database-url", withParams(url, { sslmode: "verify-full", sslrootcert: other })]);
    expect({ code: refused.code, lines: refused.stderr.trim().split("\n").length }).toEqual({ code: 1, lines: 1 });
    expect(refused.stderr).toStartWith("importd: cannot trust the TLS certificate of the database server");
  });
}
