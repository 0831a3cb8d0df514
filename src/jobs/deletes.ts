import type { ResourceDefinition } from "../resources/definition";
import { referencesTo } from "../resources/registry";
import type { Referrers } from "../store/ports";
import type { DeletedCounts, Rejection } from "./outcome";

/** What a delete job needs of its run's records (EnvironmentRecords in apply.ts, which keeps its cache in step). */
export type DeletingRecords = {
  referrers(referring: ResourceDefinition, field: string, ids: readonly string[]): Promise<Map<string, Referrers>>;
  remove(resource: ResourceDefinition, jobId: number, ids: readonly string[]): Promise<string[]>;
};

const pluralOf = (noun: string) => (noun.endsWith("y") ? `${noun.slice(0, -1)}ies` : `${noun}s`);

/** Why a record others refer to is not deleted, and what would let it be. */
function stillReferred(target: ResourceDefinition, id: string, referring: ResourceDefinition, field: string, { count, example }: Referrers): string {
  const one = count === 1;
  return (
    `${count} ${one ? referring.noun : pluralOf(referring.noun)} ${one ? "refers" : "refer"} to ${target.noun} '${id}' ` +
    `(${one ? "" : "for example "}'${example}'): delete ${one ? "it" : "them"} or change ${one ? "its" : "their"} ${field} first.`
  );
}

/**
 * Deletes a batch of ids of `resource` inside its run's transaction (DECISIONS 13). An id that names no record is
 * not found, and so is an id's second occurrence in the batch (the first deleted it): deleting is idempotent. A
 * record that another record still refers to is rejected, saying how many refer to it and one of them; nothing
 * cascades. The references are looked for with one grouped query per referring field, not per id, and not by an
 * index that every import would have to keep up.
 * The ids go to the store as sent, repeats included (the store deletes an id once): a Map or Set of 100k ids to
 * drop the repeats cost the run 70 to 160 ms (row d1), and a batch without a reference to check needs none.
 */
export async function deleteBatch(resource: ResourceDefinition, jobId: number, records: DeletingRecords, ids: readonly string[]): Promise<{ counts: DeletedCounts; rejections: Rejection[] }> {
  const referred = new Map<string, Omit<Rejection, "index">>();
  for (const { resource: referring, field } of referencesTo(resource)) {
    const named = referred.size === 0 ? ids : ids.filter((id) => !referred.has(id));
    for (const [id, found] of await records.referrers(referring, field, named)) {
      referred.set(id, { id, field: "id", reason: `Still referred to by ${pluralOf(referring.noun)}`, message: stillReferred(resource, id, referring, field, found) });
    }
  }
  const deleted = await records.remove(resource, jobId, referred.size === 0 ? ids : ids.filter((id) => !referred.has(id)));
  // Each rejected id once, at its first place in the batch, in the batch's order.
  const rejections: Rejection[] = [];
  if (referred.size > 0) {
    ids.forEach((id, index) => {
      const rejection = referred.get(id);
      if (!rejection) return;
      referred.delete(id);
      rejections.push({ index, ...rejection });
    });
  }
  return { counts: { deleted: deleted.length, notFound: ids.length - deleted.length - rejections.length }, rejections };
}
