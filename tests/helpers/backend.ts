/** Which backend the test servers use: SQLite, or PostgreSQL when TEST_BACKEND=postgres (see tests/on-postgres.ts). */
export const testBackend: "sqlite" | "postgres" = process.env.TEST_BACKEND === "postgres" ? "postgres" : "sqlite";

/**
 * How the test servers are reached: plain HTTP on loopback, or HTTPS when TEST_TRANSPORT=tls (see tests/on-tls.ts),
 * with the certificate in TEST_TLS_CERT and TEST_TLS_KEY; the test process trusts its authority (NODE_EXTRA_CA_CERTS).
 */
export const testTls = process.env.TEST_TRANSPORT === "tls" ? { cert: process.env.TEST_TLS_CERT!, key: process.env.TEST_TLS_KEY!, ca: process.env.NODE_EXTRA_CA_CERTS! } : undefined;
