// The PostgreSQL pass of `npm test` alone (its files and why: tests/passes.ts): `bun tests/on-postgres.ts [bun test
// arguments]`. Without PostgreSQL binaries it says that it skipped them, except under CI, where they are required.
import { passes } from "./passes";
import { resultLine, runPass } from "./run";

const result = await runPass(passes.find((pass) => pass.name === "postgres")!, { args: process.argv.slice(2) });
if (result.status === "skipped") console.warn(resultLine(result));
process.exitCode = result.status === "failed" ? 1 : 0;
