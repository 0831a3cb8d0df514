// The README walk-through again, written from the SDK that @hey-api/openapi-ts generates from /swagger/json: a second
// generator, independent of openapi-typescript (walkthrough.ts), reading the same document. It must typecheck under
// `tsc --strict` without a single cast (tests/openapi/second-generator.test.ts), and it runs against a real server.
import {
  cancelJob,
  completeSync,
  deleteAssets,
  getAsset,
  getJob,
  getSync,
  importAssetCategories,
  importAssets,
  importAssetTypes,
  importSubAreas,
  listAssets,
  listDeletedAssets,
  listJobs,
  listRejectedRecords,
  openSync,
  type Asset,
  type JobDocument,
  type Problem,
  type StoredAsset,
} from "./importd";
import { createClient, createConfig } from "./importd/client";

type LocationUnit = NonNullable<StoredAsset["geolocation"]>["locationUnit"];

const terminal: ReadonlyArray<JobDocument["importJobStatus"]> = ["Succeeded", "PartiallySucceeded", "Failed"];

// Keyed by the document's enums: were shapeType or locationUnit typed as a plain string, indexing these would not
// typecheck; and a value the enum gains fails `satisfies` until it is added here.
const drawnAs = {
  Point: "point",
  MultiPoint: "points",
  LineString: "line",
  MultiLineString: "lines",
  Polygon: "area",
  MultiPolygon: "areas",
} as const satisfies Record<StoredAsset["shapeType"], string>;
const metresPer = { m: 1, km: 1000, ft: 0.3048, mi: 1609.344 } as const satisfies Record<LocationUnit, number>;

function fail(what: string, problem: Problem | undefined): never {
  throw new Error(`${what}: ${problem ? `${problem.status} ${problem.title} ${problem.detail ?? ""}` : "no answer"}`);
}

/** Runs the walk-through against an environment's base URL (`http://host:port/default`) and answers what it saw, one line per step. */
export async function walkthrough(baseUrl: string, apiKey: string): Promise<string[]> {
  // The document's server is `/{env}`: the environment is part of the base URL, given whole. The key goes where the
  // document's ApiKey scheme says (the Api-Key header) on every operation that asks for it.
  const client = createClient(createConfig({ baseUrl, auth: apiKey }));
  const seen: string[] = [];

  // Long polls until the job ends; the id the 202 answered goes straight back in.
  const finished = async (id: number): Promise<JobDocument> => {
    for (;;) {
      const { data, error } = await getJob({ client, path: { id }, headers: { Prefer: "wait=10" } });
      if (!data) fail(`job ${id}`, error);
      if (terminal.includes(data.importJobStatus)) return data;
    }
  };

  // 1. Reference data, then assets that point at it.
  const subAreas = await importSubAreas({ client, body: [{ id: "north", name: "North district" }, { id: "south", name: "South district", description: null }] });
  if (!subAreas.data) fail("sub areas", subAreas.error);
  const types = await importAssetTypes({ client, body: [{ id: "pipe", name: "Pipe" }, { id: "valve", name: "Valve" }] });
  if (!types.data) fail("asset types", types.error);
  const categories = await importAssetCategories({ client, body: [{ id: "water", name: "Water network" }] });
  if (!categories.data) fail("asset categories", categories.error);
  for (const job of [subAreas.data, types.data, categories.data]) seen.push(`${job.importJobType} ${(await finished(job.id)).importJobStatus}`);

  const pipe: Asset = {
    id: "PIPE-0001",
    subAreaId: "north",
    name: "Water main, Main St",
    status: "ACT",
    assetCategoryId: "water",
    assetTypeId: "pipe",
    shapeType: "LineString",
    startPoint: 0,
    endPoint: 0.5,
    geolocation: { linearReferenceStart: "MAIN-ST", linearReferenceEnd: "MAIN-ST", locationStart: 0, locationEnd: 0.5, locationUnit: "km" },
  };
  const valve: Asset = { id: "VALVE-0001", subAreaId: "south", name: "Valve at Mill Rd", status: "ACT", assetCategoryId: "water", assetTypeId: "valve", shapeType: "Point" };
  const assets = await importAssets({ client, body: [pipe, valve] });
  if (!assets.data) fail("assets", assets.error);
  const done = await finished(assets.data.id);
  seen.push(`assets ${done.importJobStatus} ${done.output?.applied ?? 0} of ${done.recordCount}, created ${done.output?.created ?? 0}`);

  // 2. The pipe read back: a LineString, located in kilometres.
  const read = await getAsset({ client, path: { id: pipe.id } });
  if (!read.data) fail("read", read.error);
  const { shapeType, geolocation } = read.data;
  if (!geolocation) throw new Error(`${read.data.id} came back without its geolocation`);
  const metres = (geolocation.locationEnd - geolocation.locationStart) * metresPer[geolocation.locationUnit];
  seen.push(`read ${read.data.id} ${shapeType} drawn as ${drawnAs[shapeType]}, ${geolocation.locationStart} to ${geolocation.locationEnd} ${geolocation.locationUnit} (${metres} m)`);

  // 3. A partial job, and its rejected record, which comes back as it was sent.
  const west: Asset = { ...pipe, id: "PIPE-0003", subAreaId: "west", description: null };
  const partial = await importAssets({ client, body: [{ ...pipe, id: "PIPE-0002" }, west] });
  if (!partial.data) fail("partial", partial.error);
  const partialDone = await finished(partial.data.id);
  const rejected = await listRejectedRecords({ client, path: { id: partialDone.id }, query: { limit: 10 } });
  if (!rejected.data) fail("rejected", rejected.error);
  for (const { index, id, field, record } of rejected.data.items) {
    const changed = Object.entries(west).filter(([name, sent]) => JSON.stringify(record[name]) !== JSON.stringify(sent));
    seen.push(`partial ${partialDone.importJobStatus}, rejected [${index}] ${id} at ${field}, record ${changed.length === 0 ? "unchanged" : `differs at ${changed.map(([name]) => name).join(",")}`}`);
  }

  // 4. A failed job: the same id twice. A finished job cannot be canceled.
  const failed = await importAssets({ client, body: [{ ...pipe, id: "PIPE-0004" }, { ...pipe, id: "PIPE-0004" }] });
  if (!failed.data) fail("failed", failed.error);
  const failedId = failed.data.id;
  seen.push(`duplicates ${(await finished(failedId)).importJobStatus}`);
  const cancel = await cancelJob({ client, path: { id: failedId } });
  seen.push(`cancel ${cancel.response?.status} ${cancel.error?.title}`);
  const jobs = await listJobs({ client, query: { status: "Failed", limit: 10 } });
  if (!jobs.data) fail("jobs", jobs.error);
  seen.push(`failed jobs ${jobs.data.items.map((job) => job.id === failedId ? "the duplicates" : job.id).join(",")}`);

  // 5. A 400: a required field empty; `errors` maps each field to its messages.
  const invalid = await importAssets({ client, body: [{ ...pipe, subAreaId: "" }] });
  if (!invalid.error) throw new Error("an empty subAreaId was accepted");
  const problems = Object.entries(invalid.error.errors ?? {}).map(([name, messages]) => `${name}: ${messages.join(" ")}`);
  seen.push(`invalid ${invalid.error.status} ${problems.join("; ")}`);

  // 6. Every asset, two at a time.
  const pages: string[] = [];
  let after: string | undefined;
  do {
    const page = await listAssets({ client, query: { limit: 2, after } });
    if (!page.data) fail("list", page.error);
    pages.push(page.data.items.map((item) => item.id).join(","));
    after = page.data.nextCursor ?? undefined;
  } while (after);
  seen.push(`list ${pages.join(" | ")}`);

  // 7. A delete job (ids, not records), then the deletions a reader that follows them is given, and the deleted record's 404.
  const deletion = await deleteAssets({ client, body: ["PIPE-0002", "PIPE-0404"] });
  if (!deletion.data) fail("deletion", deletion.error);
  const deleted = await finished(deletion.data.id);
  const gone = await listDeletedAssets({ client, query: { limit: 10 } });
  if (!gone.data) fail("deletions", gone.error);
  const readGone = await getAsset({ client, path: { id: "PIPE-0002" } });
  const deletedBy = readGone.error?.deletedByJobId === deleted.id ? "that job" : readGone.error?.deletedByJobId;
  seen.push(`${deleted.operation} ${deleted.importJobStatus}, deleted ${deleted.output?.deleted}, deletions ${gone.data.items.map((item) => item.id).join(",")}, read ${readGone.response.status} deleted by ${deletedBy}`);

  // 8. A mirror: a sub area the source no longer has ("old") goes when a sync that sent the others completes.
  const old = await importSubAreas({ client, body: [{ id: "old", name: "Old district" }] });
  if (!old.data) fail("old sub area", old.error);
  await finished(old.data.id);
  const opened = await openSync({ client, body: { resource: "subareas" } });
  if (!opened.data) fail("sync", opened.error);
  const syncId = opened.data.id;
  const joined = await importSubAreas({ client, query: { sync: syncId }, body: [{ id: "north", name: "North district" }, { id: "south", name: "South district" }] });
  if (!joined.data) fail("join", joined.error);
  const joinedDone = await finished(joined.data.id);
  const tried = await completeSync({ client, path: { id: syncId }, query: { dryRun: true, maxDeletePercent: 50 } });
  if (!tried.data) fail("dry-run completion", tried.error);
  const wouldDelete = (await finished(tried.data.id)).output?.deleted;
  const completion = await completeSync({ client, path: { id: syncId }, query: { maxDeletePercent: 50 } });
  if (!completion.data) fail("completion", completion.error);
  const completed = await finished(completion.data.id);
  const sync = await getSync({ client, path: { id: syncId } });
  if (!sync.data) fail("get sync", sync.error);
  seen.push(
    `sync ${opened.data.state}, joined ${joinedDone.importJobStatus}, dry run would delete ${wouldDelete}, ${completed.operation} ${completed.importJobStatus} deleted ${completed.output?.deleted} of ${completed.output?.total}, ` +
      `sync ${sync.data.state} by ${sync.data.completedByJobId === completed.id ? "that job" : sync.data.completedByJobId}, sent ${sync.data.recordsSent}`,
  );
  return seen;
}
