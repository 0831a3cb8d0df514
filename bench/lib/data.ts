/**
 * Realistic benchmark data, the same bytes every run: reference data first, then assets (~360 bytes each
 * as JSON) with varied ids, names and references, most with a geolocation. Deterministic: a seeded PRNG,
 * so a run can be compared with the last one.
 */
import { seededRandom } from "../../tests/helpers/random";

const subAreaCount = 40;
const assetTypeCount = 25;
const assetCategoryCount = 8;

const streets = ["Long Street", "Mill Road", "Station Avenue", "Harbour Lane", "Church Walk", "Kings Parade", "Orchard Close", "Bridge Street"];
const kinds = ["Water main", "Sewer pipe", "Gate valve", "Hydrant", "Pump station", "Culvert", "Manhole", "Service line"];
const statuses = ["ACT", "ACT", "ACT", "PLN", "ABN", "RET"];
const shapes = ["Point", "LineString", "LineString", "MultiLineString", "Polygon"];
const units = ["m", "m", "m", "km", "ft"];

const pad = (n: number, width: number) => String(n).padStart(width, "0");

export const referenceData = {
  subareas: Array.from({ length: subAreaCount }, (_, i) => ({ id: `SA-${pad(i, 3)}`, name: `Sub area ${i}`, description: `District ${i} of the network` })),
  assettypes: Array.from({ length: assetTypeCount }, (_, i) => ({ id: `TYPE-${pad(i, 3)}`, name: `${kinds[i % kinds.length]} type ${i}` })),
  assetcategories: Array.from({ length: assetCategoryCount }, (_, i) => ({ id: `CAT-${pad(i, 2)}`, name: `Category ${i}` })),
} as const;

/** Asset number `n` (`variant` changes its values but not its id, for update runs). */
export function asset(n: number, variant = 0) {
  const next = seededRandom(n * 7919 + variant * 104729 + 1);
  const pick = <T>(values: readonly T[]) => values[Math.floor(next() * values.length)]!;
  const start = Math.round(next() * 50_000) / 10;
  const length = Math.round(next() * 5_000) / 10;
  const record: Record<string, unknown> = {
    id: `AST-${pad(n, 8)}-${(n * 2654435761 >>> 0).toString(36)}`,
    subAreaId: pick(referenceData.subareas).id,
    name: `${pick(kinds)} ${n}, ${pick(streets)}`,
    status: pick(statuses),
    assetCategoryId: pick(referenceData.assetcategories).id,
    assetTypeId: pick(referenceData.assettypes).id,
    shapeType: pick(shapes),
    startPoint: start,
    endPoint: start + length,
  };
  if (next() < 0.3) record.description = `Laid ${1950 + Math.floor(next() * 70)}, ${pick(["cast iron", "ductile iron", "PVC", "concrete", "HDPE"])}, last inspected ${2010 + Math.floor(next() * 16)}`;
  if (next() < 0.8) {
    const from = Math.round(next() * 100_000) / 100;
    record.geolocation = {
      linearReferenceStart: `LR-${pick(streets).replace(" ", "-").toUpperCase()}-${Math.floor(next() * 90)}`,
      linearReferenceEnd: `LR-${pick(streets).replace(" ", "-").toUpperCase()}-${Math.floor(next() * 90)}`,
      locationStart: from,
      locationEnd: from + Math.round(next() * 10_000) / 100,
      locationUnit: pick(units),
    };
  }
  return record;
}

/** A JSON array of assets `from` … `from + count - 1`, as UTF-8 bytes. */
export function assetsBody(count: number, from = 0, variant = 0): Uint8Array {
  const parts = new Array<string>(count);
  for (let i = 0; i < count; i++) parts[i] = JSON.stringify(asset(from + i, variant));
  return new TextEncoder().encode(`[${parts.join(",")}]`);
}

/** As many assets as fit in `bytes` (a JSON array no larger than that). */
export function assetsBodyOfSize(bytes: number, variant = 0): { body: Uint8Array; count: number } {
  const parts: string[] = [];
  let size = 2;
  for (let n = 0; ; n++) {
    const text = JSON.stringify(asset(n, variant));
    if (size + text.length + 1 > bytes) break;
    parts.push(text);
    size += text.length + 1;
  }
  return { body: new TextEncoder().encode(`[${parts.join(",")}]`), count: parts.length };
}
