// Preloaded by the PostgreSQL pass (tests/passes.ts): each of its processes starts its PostgreSQL server before its
// first test file, so that no test's own time limit pays for initdb and the server's start on a busy machine (a
// 30 s test that happened to be a process's first timed out there).
import { postgresServer } from "./postgres";

await postgresServer();
