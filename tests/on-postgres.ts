// The second half of `npm test`: the HTTP, job and client tests again, with every test server on PostgreSQL
// (TEST_BACKEND=postgres; see tests/helpers/server.ts). Without PostgreSQL binaries it says that it skipped
// them, except under CI, where they are required.
import { requirePostgres } from "./helpers/postgres";

const suites = ["tests/http", "tests/jobs", "tests/client"];

if (!requirePostgres(`the ${suites.join(", ")} tests on PostgreSQL`)) process.exit(0);
// Hooks start PostgreSQL and copy a database for each file: more than bun's 5 s on a busy machine.
const proc = Bun.spawn([process.execPath, "test", "--timeout", "30000", ...suites, ...process.argv.slice(2)], {
  cwd: `${import.meta.dir}/..`,
  env: { ...process.env, TEST_BACKEND: "postgres" },
  stdio: ["inherit", "inherit", "inherit"],
});
process.exit(await proc.exited);
