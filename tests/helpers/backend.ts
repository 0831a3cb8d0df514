import { test } from "bun:test";

/** Which backend the test servers use: SQLite, or PostgreSQL when TEST_BACKEND=postgres (see tests/on-postgres.ts). */
export const testBackend: "sqlite" | "postgres" = process.env.TEST_BACKEND === "postgres" ? "postgres" : "sqlite";

/**
 * How the test servers are reached: plain HTTP on loopback, or HTTPS when TEST_TRANSPORT=tls (see tests/on-tls.ts),
 * with the certificate in TEST_TLS_CERT and TEST_TLS_KEY; the test process trusts its authority (NODE_EXTRA_CA_CERTS).
 */
export const testTls = process.env.TEST_TRANSPORT === "tls" ? { cert: process.env.TEST_TLS_CERT!, key: process.env.TEST_TLS_KEY!, ca: process.env.NODE_EXTRA_CA_CERTS! } : undefined;

/**
 * A test of a file that the HTTPS pass runs for its other tests, which checks nothing the transport changes (what
 * the client reads or refuses before it sends, a listing's paging, a layout): it runs over plain HTTP, and over
 * HTTPS it is not registered at all (not skipped; tests/passes.ts says which files run there and why).
 */
export function notOverHttps(...args: Parameters<typeof test>): void {
  if (!testTls) test(...args);
}
