// The one place that knows which backends exist: the server, the CLI and the worker threads open their
// store here. Each backend is loaded when it is opened: an appliance on SQLite never loads PostgreSQL's driver, nor an
// instance on PostgreSQL SQLite's store (each worker thread loads its own copy of what it imports).
import type { ResourceDefinition } from "../resources/definition";
import type { OutboxRows, RecordSnapshot, SnapshotOptions, Store, StoreHandle } from "./ports";
import type { PostgresHandle } from "./postgres/store";
import { redactedUrl } from "./postgres/url";
import type { SqliteHandle } from "./sqlite/store";

export type StoreLocation = { dataDir: string; databaseUrl?: string };

/**
 * The store of the configured backend, migrated: PostgreSQL at `databaseUrl` if there is one, else SQLite in
 * the data directory. `server`: opened by the server (not by a CLI command), which on SQLite must be the only
 * one (StoreInUse otherwise). `outbox`: what a job's end writes for the webhooks (webhooks/outbox.ts's outboxRows).
 */
export async function openStore(location: StoreLocation, { server = false, outbox }: { server?: boolean; outbox: OutboxRows }): Promise<Store> {
  if (location.databaseUrl) {
    const { PostgresStore } = await import("./postgres/store");
    return PostgresStore.open(location.databaseUrl, { server, outbox });
  }
  const { SqliteStore } = await import("./sqlite/store");
  return SqliteStore.open(location.dataDir, { server, outbox });
}

/** A worker thread's store, from the handle its server's store gave it. */
export async function openStoreInThread(handle: StoreHandle, options: { outbox: OutboxRows }): Promise<Store> {
  if (handle.backend === "sqlite") return (await import("./sqlite/store")).SqliteStore.openInThread(handle as SqliteHandle, options);
  if (handle.backend === "postgres") return (await import("./postgres/store")).PostgresStore.openInThread(handle as PostgresHandle, options);
  throw new Error(`unknown store backend ${handle.backend}`);
}

/**
 * An export's snapshot of the resource's records in the environment (RecordSnapshot), on a connection of its own to
 * the store the handle is of: opened in the export's thread (worker/export-thread.ts), and in the stores' tests.
 */
export async function openSnapshot(handle: StoreHandle, resource: ResourceDefinition, environmentId: number, options?: SnapshotOptions): Promise<RecordSnapshot> {
  if (handle.backend === "sqlite") return (await import("./sqlite/snapshots")).openSqliteSnapshot((handle as SqliteHandle).dataDir, resource, environmentId, options);
  if (handle.backend === "postgres") {
    const { url, instance } = handle as PostgresHandle;
    return (await import("./postgres/snapshots")).openPostgresSnapshot(url, instance, resource, environmentId, options);
  }
  throw new Error(`unknown store backend ${handle.backend}`);
}

/** Where the store is, for people: the data directory, or the database URL without its password. */
export function describeLocation(location: StoreLocation): string {
  return location.databaseUrl ? `database: ${redactedUrl(location.databaseUrl)}` : `data: ${location.dataDir}`;
}
