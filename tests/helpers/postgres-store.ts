import { PostgresStore } from "../../src/store/postgres/store";
import { outboxRows } from "../../src/webhooks/outbox";
import { createTestDatabase } from "./postgres";

let template: Promise<string> | undefined;

/** A database migrated once per test process, to copy fresh databases from (CREATE DATABASE … TEMPLATE). */
function migratedTemplate(): Promise<string> {
  return (template ??= (async () => {
    const database = await createTestDatabase();
    const store = await PostgresStore.open(database.url, { outbox: outboxRows });
    await store.close();
    return database.name;
  })());
}

/** A fresh, migrated, empty PostgreSQL database of its own: its URL, and how to drop it. */
export async function freshPostgresDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  return createTestDatabase(await migratedTemplate());
}
