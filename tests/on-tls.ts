// The HTTPS pass of `npm test` alone (its files and why: tests/passes.ts): `bun tests/on-tls.ts [bun test arguments]`.
import { passes } from "./passes";
import { runPass } from "./run";

const result = await runPass(passes.find((pass) => pass.name === "tls")!, { args: process.argv.slice(2) });
process.exitCode = result.status === "failed" ? 1 : 0;
