// The one place that knows which backends exist: the server, the CLI and the worker threads open their
// store here.
import type { Store, StoreHandle } from "./ports";
import { redactedUrl } from "./postgres/connection";
import { PostgresStore, type PostgresHandle } from "./postgres/store";
import { SqliteStore, type SqliteHandle } from "./sqlite/store";

export type StoreLocation = { dataDir: string; databaseUrl?: string };

/**
 * The store of the configured backend, migrated: PostgreSQL at `databaseUrl` if there is one, else SQLite in
 * the data directory. `server`: opened by the server (not by a CLI command), which on SQLite must be the only
 * one (StoreInUse otherwise).
 */
export async function openStore(location: StoreLocation, { server = false } = {}): Promise<Store> {
  if (location.databaseUrl) return PostgresStore.open(location.databaseUrl, { server });
  return SqliteStore.open(location.dataDir, { server });
}

/** A worker thread's store, from the handle its server's store gave it. */
export function openStoreInThread(handle: StoreHandle): Store {
  if (handle.backend === "sqlite") return SqliteStore.openInThread(handle as SqliteHandle);
  if (handle.backend === "postgres") return PostgresStore.openInThread(handle as PostgresHandle);
  throw new Error(`unknown store backend ${handle.backend}`);
}

/** Where the store is, for people: the data directory, or the database URL without its password. */
export function describeLocation(location: StoreLocation): string {
  return location.databaseUrl ? `database: ${redactedUrl(location.databaseUrl)}` : `data: ${location.dataDir}`;
}
