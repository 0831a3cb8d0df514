import { afterAll, expect, test } from "bun:test";
import { PostgresStore } from "../../src/store/postgres/store";
import { outboxRows } from "../../src/webhooks/outbox";
import { createTestDatabase, postgresServer, requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { expectIdsPagedInByteOrder, storeContract } from "./contract";

// Each test a fresh database, copied from a migrated template on the test process's PostgreSQL server.
if (requirePostgres("the store contract on PostgreSQL")) {
  const drops: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const drop of drops) await drop();
  });
  storeContract("PostgreSQL", async () => {
    const database = await freshPostgresDatabase();
    drops.push(database.drop);
    return PostgresStore.open(database.url, { outbox: outboxRows });
  });

  // The contract's databases take the server's locale (the tests' is C.UTF-8, which sorts by bytes already); an
  // operator's may sort by language (en-US: a, A, b, B), and ids must still come in SQLite's order, byte by byte.
  test("in a database whose locale sorts by language (ICU en-US), records still page in the byte order of their ids, as on SQLite", async () => {
    const database = await createTestDatabase("template0", "LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'");
    drops.push(database.drop);
    const store = await PostgresStore.open(database.url, { outbox: outboxRows });
    try {
      const locale = await (await postgresServer()).admin((sql) => sql.unsafe("SELECT datlocprovider AS provider, daticulocale AS locale FROM pg_database WHERE datname = $1", [database.name]));
      expect([...locale]).toEqual([{ provider: "i", locale: "en-US" }]);
      await expectIdsPagedInByteOrder(store);
    } finally {
      await store.close();
    }
  });
}
