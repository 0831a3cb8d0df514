import { afterAll } from "bun:test";
import { PostgresStore } from "../../src/store/postgres/store";
import { requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { storeContract } from "./contract";

// Each test a fresh database, copied from a migrated template on the test process's PostgreSQL server.
if (requirePostgres("the store contract on PostgreSQL")) {
  const drops: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const drop of drops) await drop();
  });
  storeContract("PostgreSQL", async () => {
    const database = await freshPostgresDatabase();
    drops.push(database.drop);
    return PostgresStore.open(database.url);
  });
}
