/**
 * Storage faults as the rest of importd sees them, whatever the backend: each store translates its driver's
 * errors into these at its edge (SQLite: store/sqlite/faults.ts), and the HTTP layer maps them to answers
 * once (http/problem.ts). None of them is a job's fault: a run that meets one is retried.
 */
export type StorageFaultKind = "full" | "unavailable" | "conflict";

export abstract class StorageError extends Error {
  abstract readonly kind: StorageFaultKind;
}

/** No room to write: the disk (or the database's quota) is full. Waits until space is freed. */
export class StorageFull extends StorageError {
  readonly kind = "full";
}

/** The storage cannot be reached or used just now (locked too long, an I/O error, a lost connection). */
export class StorageUnavailable extends StorageError {
  readonly kind = "unavailable";
}

/** A write collided with another (a constraint, a run taken over): retrying it may succeed. */
export class StorageConflict extends StorageError {
  readonly kind = "conflict";
}

/** A run presented a claim token that no longer holds its jobs: another run has taken them over. */
export class StaleClaim extends StorageConflict {}

/** Rebuilds a fault reported by another thread. */
export function storageFault(kind: StorageFaultKind, message: string): StorageError {
  if (kind === "full") return new StorageFull(message);
  if (kind === "conflict") return new StorageConflict(message);
  return new StorageUnavailable(message);
}

/** Another server owns the store (on SQLite, one server per data directory); this one must not start. */
export class StoreInUse extends Error {}

/** The data directory's database cannot be used as it is; importd has not written to it. */
export class DatabaseError extends Error {}
