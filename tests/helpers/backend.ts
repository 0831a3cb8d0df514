/** Which backend the test servers use: SQLite, or PostgreSQL when TEST_BACKEND=postgres (see tests/on-postgres.ts). */
export const testBackend: "sqlite" | "postgres" = process.env.TEST_BACKEND === "postgres" ? "postgres" : "sqlite";
