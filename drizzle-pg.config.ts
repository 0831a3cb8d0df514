import { defineConfig } from "drizzle-kit";

// PostgreSQL's migrations (drizzle.config.ts is SQLite's): npm run db:generate makes both.
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/store/postgres/schema.ts",
  out: "./drizzle-pg",
});
