// The passes of `npm test` (tests/run.ts runs them side by side; tests/on-postgres.ts and tests/on-tls.ts run one).
//
// The SQLite pass runs every test file but those on PostgreSQL databases of their own (ownPostgres below, which the
// PostgreSQL pass runs). The PostgreSQL pass runs again, with every test server and command on
// PostgreSQL (TEST_BACKEND=postgres, see tests/helpers/server.ts and tests/helpers/process.ts), the files whose
// checks are about what the store keeps or how it behaves under load and faults: what could differ by backend. The
// TLS pass runs again, with every test server serving HTTPS (TEST_TRANSPORT=tls, see tests/helpers/backend.ts), the
// files about the wire: raw requests and bodies, held polls, the client library and the CLI talking to a server,
// the browser: what could work only over plain HTTP.
//
// The rule for a file in a second pass: it goes in only if the pass changes what the file exercises. So these run
// once, in the SQLite pass:
//   - what never reaches a test server or never honours TEST_BACKEND/TEST_TRANSPORT: tests/jobs/group-commit,
//     parse-once, payload and delete-failures (a SQLite store of their own), tests/webhooks/send (sendWebhook against receivers of
//     its own), tests/openapi/contract (the answer checker, shown on a stand-in), tests/cli/usage (the command line
//     before any database);
//   - OpenAPI generation and lint (tests/openapi/lint, generated-client, second-generator): the served document
//     is the same on every backend and transport; tests/http/openapi checks the document against the routes;
//   - tests/durability/responsive: the worker threads keep the HTTP thread free, the same on both backends; on
//     PostgreSQL, beside the other passes, one poll in 484 took 3.5 s (p95 109 ms) while the machine's load was 14;
//   - what the server checks before the store: a request's shape (tests/http/validation, methods-and-queries) and
//     its body's size, pace and share of memory (limits, uploads, isolation-uploads), on PostgreSQL; the same
//     rules and the OpenAPI properties (tests/openapi/properties) over HTTPS, where the wire's own tests run;
//   - what the client does with a file before it sends it (tests/client/import-files, rejected-csv-injection, the
//     large-file imports tests/client/import-large and tests/console/import-large): reading, chunking, memory,
//     the rejected file; sending it is tests/client/import-command (and import-mirror, its mirror: a sync's client
//     side, whose server side tests/http/mirror checks on PostgreSQL) over HTTPS and tests/client/import-server-lost on
//     both, as is tests/client/mirror-large, the mirror of 100k rows as a user runs it (its deletes are the store's); the PostgreSQL backend's bulk path has its own tests (tests/store/postgres-copy, tests/postgres/*);
//   - the browser (tests/console/*) on PostgreSQL: a thin reader of the API, whose answers the http and jobs files
//     check there; over HTTPS the console's sign-in, live jobs and cancel run (tests/console/console);
//   - on HTTPS, job semantics (tests/jobs/* but long-poll, whose held answers are the transport's business), the
//     stored data (idempotency, rejected, reads, status, observability), keys and rate limits: the same whatever
//     carries the request, and run on PostgreSQL, where the store matters; tests/http/security-headers, whose
//     HSTS test starts an HTTPS server of its own in the SQLite pass (the other headers are the same on both).
// Within a file that the HTTPS pass runs, the tests of what the transport does not change (what the client reads
// or refuses before it sends, a listing's paging, a layout) are `notOverHttps` (tests/helpers/backend.ts): not
// registered there. The HTTPS pass keeps each command's and page's requests going through: an import, a resume,
// a mirror and its dry run, a delete, the console's sign-in, job page and cancel, an export read, left and stalled.
// The tests of SQLite's file (tests/cli/database-file, server-lock, tests/durability/disk-full and crash) have their
// PostgreSQL counterparts in tests/postgres/* (tests/postgres/kill-instances for crash), which the SQLite pass runs.

export type Pass = {
  name: string;
  /** Test files (paths from the project root); empty means every file. */
  files: string[];
  /** `bun test --parallel` processes that take the files from one list (the slowest first, by tests/timings.json). */
  processes: number;
  /** Test files this pass leaves out (`--path-ignore-patterns`), when `files` is every file. */
  ignore?: string[];
  /** Run after the passes side by side, by itself: tests whose timing a busy machine breaks. */
  alone?: boolean;
  /** Modules `bun test` loads in each process before the test files (`--preload`). */
  preload?: string[];
  /** The pass's environment, and what to remove after it. */
  setUp(): Promise<{ env: Record<string, string>; tearDown(): void }>;
};

const file = (path: string) => `./tests/${path}.test.ts`;
const files = (dir: string, names: string[]) => names.map((name) => file(`${dir}/${name}`));

// Files that run importd on PostgreSQL databases of their own (an explicit --database-url or databaseUrl), whatever
// TEST_BACKEND says: the same tests in either pass. They run in the PostgreSQL pass, whose processes have their
// PostgreSQL running already, and not in the SQLite pass, which runs every other file and ends last (some 50 CPU-s
// moved: the passes end closer together, the machine less idle at the end). Not tests/postgres/kill-instances: its
// three instances, beside http/export-large in the PostgreSQL pass's other process, held a status poll there past
// export-large's 1 s bound (1.2 s, once); in the SQLite pass it never met it.
const ownPostgres = ["serve", "haproxy-instances", "jobs-across-instances"].map((name) => `tests/postgres/${name}.test.ts`).concat("tests/store/postgres.test.ts");

const onPostgres = [
  ...ownPostgres.map((path) => `./${path}`),
  ...files("http", ["auth", "deletions", "exports", "export-large", "idempotency", "imports", "mirror", "no-key-answers", "observability", "rate-limit", "reads", "rejected", "status"]),
  ...files("jobs", ["cancel", "counts", "dry-run", "fresh-reads", "long-poll", "processing", "recovery"]),
  ...files("client", ["client", "import-server-lost", "jobs-command", "mirror-large"]),
  ...files("openapi", ["properties"]),
  ...files("webhooks", ["cli", "kill", "webhooks", "isolation", "ping"]),
  file("cli/cli"),
  ...files("durability", ["contention", "kill", "poison", "shutdown"]),
];

const overTls = [
  ...files("http", ["edge", "exports", "half-close", "imports", "limits", "trusted-proxies", "uploads"]),
  ...files("jobs", ["long-poll"]),
  ...files("client", ["client", "import-command", "import-mirror", "delete-command", "import-server-lost"]),
  ...files("webhooks", ["cli"]),
  ...files("console", ["console"]),
];

/**
 * Bun's allocator (mimalloc) hands freed memory back to the system 100 ms after it is freed, and takes it back, page
 * fault by page fault, when it is needed again. The tests allocate and free in bursts (a server started, a batch, an
 * export), and that churn was a sixth of all the CPU a CI run burnt (perf: the allocator's purge thread 6%, and the
 * page faults after it). In these passes freed memory stays with the process: a test process, each server it spawns
 * and each command (CPU-s, same file: http/exports 15.3-20.1 to 10.4-12.0, durability/crash 21-26 to 18-21).
 * Nothing is shipped this way. What it changes is what a test reads of a process's memory, so the tests that
 * read it start the process they read as shipped (`asShipped` in tests/helpers/process.ts), and the TLS pass keeps
 * the shipped setting throughout (tests/jobs/long-poll reads its own process's memory there).
 */
export const keepFreedMemory = { MIMALLOC_PURGE_DELAY: "-1" };

const keepingFreedMemory = async () => ({ env: keepFreedMemory, tearDown() {} });

// Run after the passes side by side, alone on the machine, where what they time is importd's and not the load's:
// the fencing test's instance takes a paused one's job over in 8 s alone, and did not within 150 s at load 14 (twice
// in four runs); with backends frozen, database-faults' first 503 came from the pool's wait (5 s) before any
// statement met its deadline (10 s), which is what it checks (once in three runs at load 12). The two run side by
// side with each other (one process each: the machine 60% busy, 26 to 27 s against 38 one after the other).
const alone = ["tests/postgres/fencing.test.ts", "tests/postgres/database-faults.test.ts"];

export const passes: Pass[] = [
  { name: "sqlite", files: [], ignore: [...alone, ...ownPostgres], processes: 2, setUp: keepingFreedMemory },
  {
    name: "postgres",
    files: onPostgres,
    processes: 2,
    preload: ["./tests/helpers/postgres-first.ts"],
    async setUp() {
      const { requirePostgres } = await import("./helpers/postgres");
      if (!requirePostgres(`the PostgreSQL pass (${onPostgres.length} files)`)) throw new SkippedPass("no PostgreSQL server binaries");
      return { env: { TEST_BACKEND: "postgres", ...keepFreedMemory }, tearDown() {} };
    },
  },
  {
    name: "tls",
    files: overTls,
    processes: 1,
    // The certificate is made for this run by an authority of the tests' own, which the test process trusts
    // (NODE_EXTRA_CA_CERTS, read by Bun at start: hence a process of its own).
    async setUp() {
      const { mkdtempSync, rmSync, writeFileSync } = await import("node:fs");
      const { tmpdir } = await import("node:os");
      const { join } = await import("node:path");
      const { testAuthority, writeIdentity } = await import("./helpers/tls");
      const dir = mkdtempSync(join(tmpdir(), "importd-tls-pass-"));
      const authority = await testAuthority("TLS pass");
      const ca = join(dir, "ca.crt");
      writeFileSync(ca, authority.cert);
      const { cert, key } = writeIdentity(dir, await authority.issue(["localhost", "127.0.0.1"]));
      return {
        env: { TEST_TRANSPORT: "tls", TEST_TLS_CERT: cert, TEST_TLS_KEY: key, NODE_EXTRA_CA_CERTS: ca },
        tearDown: () => rmSync(dir, { recursive: true, force: true }),
      };
    },
  },
  // After the others, without them, in the SQLite pass's environment.
  { name: "alone", files: alone.map((path) => `./${path}`), alone: true, processes: 2, setUp: keepingFreedMemory },
];

/** A pass that cannot run here (outside CI, without PostgreSQL), said so instead of run. */
export class SkippedPass extends Error {}

/**
 * The long suites at the scale every landing ran them at before issue 48 (`npm run test:long`): run them before any
 * change to storage, the queue or the worker pool. Each file in the passes it ran in then.
 */
export const longSettings: Record<string, string> = {
  CRASH_ROUNDS: "50",
  PG_KILL_KILLS: "20",
  IMPORT_MB: "50",
  CONSOLE_IMPORT_MB: "20",
  PG_FAILOVER_ROUNDS: "2",
  FUZZ_SCALE: "1",
  CONTENTION_CLI_ROUNDS: "8",
};
export const longFiles: Record<string, string[]> = {
  sqlite: [file("durability/crash"), file("postgres/kill-instances"), file("postgres/database-faults"), file("client/import-large"), file("console/import-large"), "./tests/fuzz/http.fuzz.test.ts", file("durability/contention")],
  postgres: [file("client/import-large"), file("console/import-large"), file("durability/contention")],
  tls: [file("client/import-large"), file("console/import-large")],
};
