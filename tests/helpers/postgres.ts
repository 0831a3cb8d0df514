import { spawn, type Subprocess } from "bun";
import { chownSync, existsSync, mkdtempSync, readdirSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./net";
import { testAuthority, writeIdentity } from "./tls";
import { testSql, type TestSql } from "./sql";

/**
 * A real PostgreSQL server for the tests: started once per test process, on a free port, in a temp
 * directory, from Debian's postgresql package (/usr/lib/postgresql/<version>/bin) or an initdb on PATH;
 * stopped when the process exits. Each test takes a fresh database copied from a template
 * (CREATE DATABASE … TEMPLATE: about 20 ms), so that no test sees another's rows.
 *
 * Without PostgreSQL binaries the PostgreSQL tests are skipped with a line that says so, except under CI
 * (the CI variable set), where .ci/run installs them and a missing server is a failure.
 */

const superuser = "importd_test";

function findBinDir(): string | undefined {
  const debian = "/usr/lib/postgresql";
  if (existsSync(debian)) {
    const versions = readdirSync(debian).filter((name) => /^\d+$/.test(name) && existsSync(join(debian, name, "bin", "initdb")));
    versions.sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return join(debian, versions[0], "bin");
  }
  const onPath = Bun.which("initdb");
  return onPath ? join(onPath, "..") : undefined;
}

const binDir = findBinDir();

/** Whether the PostgreSQL tests can run here. */
export const postgresAvailable = binDir !== undefined;

/** For `describe.skipIf(!postgresAvailable)`: says plainly why they were skipped, or fails under CI. */
export function requirePostgres(what: string): boolean {
  if (postgresAvailable) return true;
  if (process.env.CI) throw new Error(`${what}: no PostgreSQL server binaries found, and under CI they are required (apt-get install postgresql)`);
  console.warn(`SKIPPED ${what}: no PostgreSQL server binaries found (apt-get install postgresql, then run the tests again)`);
  return false;
}

// initdb and postgres refuse to run as root; CI runs as root, so they run as the package's postgres user.
const asServerUser = (command: string[]) => (process.getuid?.() === 0 ? ["runuser", "-u", "postgres", "--", ...command] : command);

async function run(command: string[]): Promise<void> {
  const proc = spawn(asServerUser(command), { stdout: "pipe", stderr: "pipe" });
  const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`${command.join(" ")} exited ${code}: ${stderr}`);
}

export type PostgresServer = {
  port: number;
  /** The authority that signed the server's TLS certificate (for 127.0.0.1 and localhost), as a file: sslrootcert. */
  caFile: string;
  /** A connection URL for database `name` (the superuser's, with a password, as an operator's would be). */
  url(name: string): string;
  /** Runs `fn` with an admin connection to the `postgres` database. */
  admin<T>(fn: (sql: TestSql) => Promise<T>): Promise<T>;
};

let started: Promise<PostgresServer> | undefined;

/** The test process's PostgreSQL server, started on first use. */
export function postgresServer(): Promise<PostgresServer> {
  return (started ??= startPostgres());
}

export const testPassword = "s3cret-test-pw";

/** Another process's server took the port between freePort() and our server's start (passes run side by side). */
class PortTaken extends Error {}

async function startPostgres(): Promise<PostgresServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startPostgresOnce();
    } catch (error) {
      if (!(error instanceof PortTaken) || attempt === 5) throw error;
    }
  }
}

async function startPostgresOnce(): Promise<PostgresServer> {
  if (!binDir) throw new Error("no PostgreSQL server binaries");
  const dir = mkdtempSync(join(tmpdir(), "importd-pg-"));
  const dataDir = join(dir, "data");
  const passwordFile = join(dir, "password");
  await Bun.write(passwordFile, testPassword);
  if (process.getuid?.() === 0) {
    const id = (flag: string) => Number(Bun.spawnSync(["id", flag, "postgres"]).stdout.toString());
    for (const path of [dir, passwordFile]) chownSync(path, id("-u"), id("-g"));
  }
  // --no-sync and fsync=off: nothing here outlives the test run, and the tests kill importd, never PostgreSQL.
  await run([join(binDir, "initdb"), "-D", dataDir, "-U", superuser, `--pwfile=${passwordFile}`, "--auth=scram-sha-256", "-E", "UTF8", "--no-sync", "--no-instructions"]);
  // TLS on, with a certificate of the tests' own authority: clients that ask for it (sslmode) get it, the others not.
  const authority = await testAuthority("PostgreSQL tests");
  const caFile = join(dir, "ca.crt");
  await Bun.write(caFile, authority.cert);
  const tls = writeIdentity(dataDir, await authority.issue(["localhost", "127.0.0.1"]));
  if (process.getuid?.() === 0) {
    const id = (flag: string) => Number(Bun.spawnSync(["id", flag, "postgres"]).stdout.toString());
    for (const path of [tls.cert, tls.key]) chownSync(path, id("-u"), id("-g"));
  }
  const port = await freePort();
  // Under a watchdog shell that outlives this process: bun test runs no exit handlers, so the server would
  // otherwise run on after the tests. When this process is gone, the shell shuts the server down at once
  // (SIGQUIT to the pid in postmaster.pid: runuser, which starts it as root, does not pass signals on) and
  // removes its directory. It waits on `tail --pid`, which looks for this process once a second without starting
  // one (a `sleep 1` loop started some 3,000 processes a CI run), and on the server, whichever ends first.
  const watchdog = [
    `"$@" & server=$!`,
    `tail --pid=${process.pid} -f /dev/null & tests=$!`,
    `wait -n "$server" "$tests"; kill "$tests" 2>/dev/null`,
    `kill -QUIT "$(head -n 1 '${dataDir}/postmaster.pid' 2>/dev/null)" 2>/dev/null; wait; rm -rf '${dir}'`,
  ].join("; ");
  const server: Subprocess = spawn(
    [
      "bash", "-c", watchdog, "bash",
      ...asServerUser([
        join(binDir, "postgres"),
        "-D", dataDir,
        "-p", String(port),
        "-k", dir,
        // 127.0.0.2 too: an address that reaches the server but that its TLS certificate does not name.
        "-c", "listen_addresses=127.0.0.1,127.0.0.2",
        "-c", "fsync=off",
        "-c", "synchronous_commit=off",
        "-c", "full_page_writes=off",
        "-c", "max_connections=300",
        "-c", "shared_buffers=64MB",
        "-c", "ssl=on",
        "-c", `ssl_cert_file=${tls.cert}`,
        "-c", `ssl_key_file=${tls.key}`,
      ]),
    ],
    { stdout: "ignore", stderr: "pipe" },
  );
  const serverLog = new Response(server.stderr as ReadableStream).text();

  const url = (name: string) => `postgres://${superuser}:${encodeURIComponent(testPassword)}@127.0.0.1:${port}/${name}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const sql = testSql(url("postgres"));
    let answered: { data_directory: string }[];
    try {
      answered = await sql<{ data_directory: string }>`SELECT current_setting('data_directory') AS data_directory`;
    } catch (error) {
      await sql.end();
      const log = await Promise.race([serverLog, Bun.sleep(100).then(() => "")]);
      if (server.exitCode !== null && /could not bind|already in use/i.test(log)) throw new PortTaken(log);
      if (server.exitCode !== null || Date.now() > deadline) throw new Error(`PostgreSQL did not start: ${error}\n${log}`);
      await Bun.sleep(50);
      continue;
    }
    await sql.end();
    // The same superuser and password in every test process: make sure it is this process's server that answered.
    if (answered[0]?.data_directory === realpathSync(dataDir)) break;
    // Ours could not bind the port, and its watchdog removes its directory.
    throw new PortTaken(`port ${port} answered from ${answered[0]?.data_directory}`);
  }
  return {
    port,
    caFile,
    url,
    async admin(fn) {
      const sql = testSql(url("postgres"));
      try {
        return await fn(sql);
      } finally {
        await sql.end();
      }
    },
  };
}

let databases = 0;

/**
 * A fresh, empty database on the test process's server, named for nothing in particular; `template` copies
 * another database (a migrated one, say) instead of starting empty; `options` are CREATE DATABASE's (a locale, say).
 */
export async function createTestDatabase(template = "template0", options = ""): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const server = await postgresServer();
  const name = `importd_test_${process.pid}_${++databases}`;
  // FILE_COPY: the template's files copied whole, not PostgreSQL 15's default (WAL_LOG, every block of the copy
  // through shared buffers and the WAL): 49 against 135 ms of the server's CPU a database, and the tests make hundreds.
  await server.admin((sql) => sql.unsafe(`CREATE DATABASE "${name}" TEMPLATE "${template}" STRATEGY = FILE_COPY ${options}`));
  return {
    name,
    url: server.url(name),
    drop: () => server.admin((sql) => sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => undefined),
  };
}
