// Baseline for rows pg 1a and pg 1b: the plain way to load a JSON file into PostgreSQL, in its own process. It
// parses the file, streams the rows into a temporary table with COPY and merges them into importd's `assets`
// table with one INSERT … ON CONFLICT, in one transaction, twice (into the empty table, then as updates). It
// neither validates nor checks references, stores no payload, keeps no job, answers nobody.
// Usage: bun pg-merge.ts <body.json> <database url>   The database is importd-migrated and empty. Prints one JSON line.
import { readFileSync } from "node:fs";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { Static } from "@sinclair/typebox";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import type { assetRecord } from "../../src/resources/assets";

// The record's shape from importd's own schema; only the type is imported, the script runs none of importd.
type Asset = Static<typeof assetRecord>;

const [bodyFile, url] = process.argv.slice(2);
const environmentId = 1;
const jobId = 1;
// The assets table's columns as importd fills them (src/store/postgres/records.ts); the environment and the
// job's metadata are the same for every row, so the merge adds them rather than COPY carrying them.
const copied = [
  ["id", "text"], ["sub_area_id", "text"], ["name", "text"], ["description", "text"], ["status", "text"],
  ["asset_category_id", "text"], ["asset_type_id", "text"], ["shape_type", "text"], ["start_point", "double precision"],
  ["end_point", "double precision"], ["linear_reference_start", "text"], ["linear_reference_end", "text"],
  ["location_start", "double precision"], ["location_end", "double precision"], ["location_unit", "text"],
] as const;
const names = copied.map(([name]) => name);
const updated = [...names.slice(1), "updated_at", "last_job_id"];
const createIncoming = `CREATE TEMPORARY TABLE incoming (${copied.map(([name, type]) => `${name} ${type}`).join(", ")}) ON COMMIT DROP`;
const merge =
  `INSERT INTO assets (environment_id, ${names.join(", ")}, updated_at, last_job_id) ` +
  `SELECT ${environmentId}, ${names.join(", ")}, $1::text, ${jobId} FROM incoming ` +
  `ON CONFLICT (environment_id, id) DO UPDATE SET ${updated.map((name) => `${name} = excluded.${name}`).join(", ")}`;

// COPY's text format: a tab between fields, \N for null, and a backslash before any tab, newline or backslash
// inside a value. Testing first costs about half of replacing in every value, and the data needs no escape.
const escapes: Record<string, string> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r" };
const special = /[\\\t\n\r]/;
const text = (value: string | undefined) =>
  value === undefined ? "\\N" : special.test(value) ? value.replace(/[\\\t\n\r]/g, (c) => escapes[c]!) : value;
const number = (value: number | undefined) => (value === undefined ? "\\N" : String(value));

function copyLine(r: Asset): string {
  const g = r.geolocation;
  return (
    `${text(r.id)}\t${text(r.subAreaId)}\t${text(r.name)}\t${text(r.description)}\t${text(r.status)}\t${text(r.assetCategoryId)}\t` +
    `${text(r.assetTypeId)}\t${text(r.shapeType)}\t${number(r.startPoint)}\t${number(r.endPoint)}\t${text(g?.linearReferenceStart)}\t` +
    `${text(g?.linearReferenceEnd)}\t${number(g?.locationStart)}\t${number(g?.locationEnd)}\t${text(g?.locationUnit)}\n`
  );
}

// A few thousand rows per write: few enough writes to cost nothing, small enough to stream.
const linesPerChunk = 2_000;

function* copyChunks(records: Asset[]): Generator<string> {
  for (let start = 0; start < records.length; start += linesPerChunk) {
    let chunk = "";
    for (let i = start; i < Math.min(records.length, start + linesPerChunk); i++) chunk += copyLine(records[i]!);
    yield chunk;
  }
}

// One connection, with pg and pg-copy-streams as importd uses them; connected before the clock starts, as importd's
// pool is.
const client = new pg.Client({ connectionString: url });
await client.connect();

/** read → parse → COPY → merge → commit; each phase's time too. */
async function timed() {
  const start = performance.now();
  const records = JSON.parse(readFileSync(bodyFile!, "utf8")) as Asset[];
  const parsed = performance.now();
  let copiedAt = 0;
  let mergedAt = 0;
  let written = 0;
  await client.query("BEGIN");
  await client.query(createIncoming);
  await pipeline(Readable.from(copyChunks(records)), client.query(copyFrom("COPY incoming FROM STDIN")));
  copiedAt = performance.now();
  written = (await client.query(merge, [new Date().toISOString()])).rowCount ?? 0;
  mergedAt = performance.now();
  await client.query("COMMIT");
  const end = performance.now();
  return { ms: end - start, written, phases: { parseMs: parsed - start, copyMs: copiedAt - parsed, mergeMs: mergedAt - copiedAt, commitMs: end - mergedAt } };
}

const empty = await timed();
const update = await timed();
await client.end();
if (empty.written !== update.written) throw new Error(`wrote ${empty.written} rows, then ${update.written}`);
console.log(JSON.stringify({ emptyMs: empty.ms, updateMs: update.ms, written: empty.written, phases: { empty: empty.phases, update: update.phases } }));
