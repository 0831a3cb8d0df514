import type { ResourceDefinition } from "../resources/definition";
import { referencesTo } from "../resources/registry";
import type { Referrers } from "../store/ports";
import type { DeletedCounts, Rejection } from "./outcome";

/** What a delete job needs of its run's records (EnvironmentRecords in apply.ts, which keeps its cache in step). */
export type DeletingRecords = {
  referrers(referring: ResourceDefinition, field: string, ids: readonly string[]): Promise<Map<string, Referrers>>;
  remove(resource: ResourceDefinition, jobId: number, ids: readonly string[]): Promise<Set<string>>;
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
 */
export async function deleteBatch(resource: ResourceDefinition, jobId: number, records: DeletingRecords, ids: readonly string[]): Promise<{ counts: DeletedCounts; rejections: Rejection[] }> {
  const firstAt = new Map<string, number>();
  ids.forEach((id, index) => {
    if (!firstAt.has(id)) firstAt.set(id, index);
  });
  const distinct = [...firstAt.keys()];
  const rejected = new Map<string, Rejection>();
  for (const { resource: referring, field } of referencesTo(resource)) {
    const named = distinct.filter((id) => !rejected.has(id));
    for (const [id, found] of await records.referrers(referring, field, named)) {
      const message = stillReferred(resource, id, referring, field, found);
      rejected.set(id, { index: firstAt.get(id)!, id, field: "id", reason: `Still referred to by ${pluralOf(referring.noun)}`, message });
    }
  }
  const deleted = await records.remove(resource, jobId, distinct.filter((id) => !rejected.has(id)));
  const rejections = [...rejected.values()].sort((a, b) => a.index - b.index);
  return { counts: { deleted: deleted.size, notFound: ids.length - deleted.size - rejections.length }, rejections };
}
