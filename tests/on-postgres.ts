// The second half of `npm test`: the HTTP, job, client, OpenAPI, webhook, CLI and crash tests again, with every test server and
// command on PostgreSQL (TEST_BACKEND=postgres; see tests/helpers/server.ts and tests/helpers/process.ts). Left
// out: the tests about SQLite's file (tests/cli/database-file, tests/cli/server-lock, tests/durability/disk-full,
// and tests/durability/crash, whose PostgreSQL counterpart with three instances is tests/postgres/kill-instances). Without PostgreSQL binaries it says that it skipped
// them, except under CI, where they are required.
import { requirePostgres } from "./helpers/postgres";

const suites = [
  "tests/http",
  "tests/jobs",
  "tests/client",
  "tests/openapi",
  "tests/webhooks",
  "tests/console",
  "tests/cli/cli.test.ts",
  ...["contention", "kill", "poison", "responsive", "shutdown"].map((name) => `tests/durability/${name}.test.ts`),
];

if (!requirePostgres(`the ${suites.join(", ")} tests on PostgreSQL`)) process.exit(0);
// Hooks start PostgreSQL and copy a database for each file: more than bun's 5 s on a busy machine.
const proc = Bun.spawn([process.execPath, "test", "--timeout", "30000", ...suites, ...process.argv.slice(2)], {
  cwd: `${import.meta.dir}/..`,
  env: { ...process.env, TEST_BACKEND: "postgres" },
  stdio: ["inherit", "inherit", "inherit"],
});
process.exit(await proc.exited);
