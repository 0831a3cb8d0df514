// The one place that knows which backends exist: the server, the CLI and the worker threads open their
// store here.
import type { Store, StoreHandle } from "./ports";
import { SqliteStore, type SqliteHandle } from "./sqlite/store";

/**
 * The store of the configured backend, migrated: SQLite in the data directory. `server`: opened by the server
 * (not by a CLI command), which on SQLite must be the only one (StoreInUse otherwise).
 */
export function openStore(options: { dataDir: string }, { server = false } = {}): Store {
  return SqliteStore.open(options.dataDir, { server });
}

/** A worker thread's store, from the handle its server's store gave it. */
export function openStoreInThread(handle: StoreHandle): Store {
  if (handle.backend === "sqlite") return SqliteStore.openInThread(handle as SqliteHandle);
  throw new Error(`unknown store backend ${handle.backend}`);
}
