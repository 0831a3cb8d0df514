/** Realistic test data: reference data first, then assets that point at it. */

export const subAreas = [
  { id: "north", name: "North district" },
  { id: "south", name: "South district", description: "Everything south of the river" },
];
export const assetTypes = [{ id: "pipe", name: "Pipe" }, { id: "valve", name: "Valve" }];
export const assetCategories = [{ id: "water", name: "Water network" }];

export function asset(index: number, overrides: Record<string, unknown> = {}) {
  return {
    id: `A-${String(index).padStart(7, "0")}`,
    subAreaId: index % 2 === 0 ? "north" : "south",
    name: `Water main ${index} on Long Street between the old mill and the station`,
    description: "Cast iron, laid 1962, relined 2004",
    status: "ACT",
    assetCategoryId: "water",
    assetTypeId: index % 3 === 0 ? "valve" : "pipe",
    shapeType: "LineString" as const,
    startPoint: index,
    endPoint: index + 10.5,
    geolocation: {
      linearReferenceStart: `LR-${index}`,
      linearReferenceEnd: `LR-${index + 1}`,
      locationStart: index * 2,
      locationEnd: index * 2 + 7,
      locationUnit: "m" as const,
    },
    ...overrides,
  };
}

export const assets = (count: number, from = 0) => Array.from({ length: count }, (_, i) => asset(from + i));

/** A JSON array of assets of about `bytes` bytes, built without holding the records as objects. */
export function assetsBody(bytes: number): { body: string; count: number } {
  const parts: string[] = [];
  let size = 2;
  let count = 0;
  while (size < bytes) {
    const text = JSON.stringify(asset(count));
    parts.push(text);
    size += text.length + 1;
    count++;
  }
  return { body: `[${parts.join(",")}]`, count };
}

import { importAndWait } from "./api";

export async function seedReferenceData(base: string, key: string) {
  for (const [resource, records] of [["subareas", subAreas], ["assettypes", assetTypes], ["assetcategories", assetCategories]] as const) {
    const job = await importAndWait(base, resource, key, records as unknown[]);
    if (job.importJobStatus !== "Succeeded") throw new Error(`seeding ${resource}: ${job.output?.message}`);
  }
}
