import { SyncState } from "../../domain/job";
import type { Sync } from "../../store/ports";
import { youSent } from "../paging";
import { conflict, notFound, validationProblem } from "../problem";
import type { Services } from "../services";

// What the routes ask of a sync before they queue a job in it: the import that joins it (imports.ts) and its
// completion (syncs.ts). The job itself checks again when it runs (jobs/syncs.ts): these answers are for the client.

/** Sync ids are positive integers, as the 201 answered them. */
export const syncIdFormat = /^[1-9][0-9]{0,9}$/;

export function syncState(sync: Sync, now = new Date().toISOString()): SyncState {
  if (sync.completedAt !== null) return SyncState.Completed;
  return sync.expiresAt <= now ? SyncState.Expired : SyncState.Open;
}

export const syncNotFound = () => notFound("No sync with this id exists in this environment (an ended sync is kept as long as job documents). Open one with POST /v2/syncs.");

/** The environment's sync named in the path: a 404 when it names none. */
export async function syncInPath(services: Services, environmentId: number, idText: string): Promise<Sync> {
  const sync = syncIdFormat.test(idText) ? await services.syncs.find(environmentId, Number(idText)) : undefined;
  if (!sync) throw syncNotFound();
  return sync;
}

/** A 409 for a sync that has ended: what it is, and that a new one is needed. */
export function refuseEnded(sync: Sync, doing: string): void {
  const state = syncState(sync);
  if (state === SyncState.Completed) {
    throw conflict(`Sync ${sync.id} is completed (by job ${sync.completedByJobId} at ${sync.completedAt}): it can no longer ${doing}. Open a new sync with POST /v2/syncs.`);
  }
  if (state === SyncState.Expired) {
    throw conflict(
      `Sync ${sync.id} expired at ${sync.expiresAt} (a sync must be completed within 24 hours of opening); nothing was deleted, and it can no longer ${doing}. ` +
        "Open a new sync with POST /v2/syncs and send the records again.",
    );
  }
}

/**
 * The sync an import's `?sync=` names, to join: a 400 for a malformed id, an id that names no sync of this environment
 * (the query names it, not the path: the path /v2/<resource> is there), or a sync of another resource; a 409 for one
 * that has ended.
 */
export async function syncToJoin(services: Services, environmentId: number, resource: string, text: string): Promise<number> {
  if (!syncIdFormat.test(text)) throw validationProblem({ sync: [`'Sync' must be the id of an open sync, a whole number as POST /v2/syncs answered it. ${youSent(text)}`] });
  const sync = await services.syncs.find(environmentId, Number(text));
  if (!sync) throw validationProblem({ sync: [`There is no sync ${text} in this environment. Open one with POST /v2/syncs, and send its id.`] });
  if (sync.resource !== resource) {
    throw validationProblem({ sync: [`Sync ${sync.id} mirrors ${sync.resource}, not ${resource}: send these records to POST /v2/${sync.resource}?sync=${sync.id}, or open a sync for ${resource}.`] });
  }
  refuseEnded(sync, "take imports");
  return sync.id;
}
