import { assetResource } from "./assets";
import type { ResourceDefinition } from "./definition";
import { referenceResource } from "./reference-data";

/** Every import resource the service offers. The HTTP routes, the worker and OpenAPI all read this list. */
export const resources: readonly ResourceDefinition[] = [
  // In the order they are imported: the references of each example exist once the examples above it are applied.
  referenceResource("subareas", "SubArea", "sub area", [
    { id: "north", name: "North district" },
    { id: "south", name: "South district" },
  ]),
  referenceResource("assettypes", "AssetType", "asset type", [
    { id: "pipe", name: "Pipe" },
    { id: "valve", name: "Valve" },
  ]),
  referenceResource("assetcategories", "AssetCategory", "asset category", [{ id: "water", name: "Water network" }]),
  assetResource,
];

/** The importJobType of each resource's jobs, e.g. "Asset": what a job document's `importJobType` can be. */
export const jobTypes: readonly string[] = resources.map((resource) => resource.jobType);

const byPath = new Map(resources.map((resource) => [resource.path, resource]));
const byJobType = new Map(resources.map((resource) => [resource.jobType, resource]));

export function resourceByPath(path: string): ResourceDefinition | undefined {
  return byPath.get(path);
}

export function resourceByJobType(jobType: string): ResourceDefinition {
  const resource = byJobType.get(jobType);
  if (!resource) throw new Error(`no import resource has job type ${jobType}`);
  return resource;
}

/** The fields of other resources that name records of `resource` (an asset's subAreaId names a sub area, say). */
export function referencesTo(resource: ResourceDefinition): Array<{ resource: ResourceDefinition; field: string }> {
  return resources.flatMap((referring) =>
    referring.references.filter((reference) => reference.resource === resource.path).map((reference) => ({ resource: referring, field: reference.field })),
  );
}
