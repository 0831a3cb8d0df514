// Baseline for row e1: a plain script exporting the assets as NDJSON, with nothing else (no snapshot of its own, no
// HTTP, no slices): what the export row is measured against.
// Usage: bun plain-export.ts <assets.json> <dir>   Imports the assets untimed, then times reading the table in id order
// and writing each record, in the API's shape (the same bytes importd sends), to a file. Prints one JSON line.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { getTableColumns } from "drizzle-orm";
import { assetResource } from "../../src/resources/assets";
import { assets } from "../../src/store/sqlite/schema";
import { referenceData } from "../lib/data";
import { openPlainDatabase, plainImport, seedPlainReferences } from "../lib/plain";

const [assetsFile, dir] = process.argv.slice(2);
const db = openPlainDatabase(join(dir!, "plain.sqlite"));
seedPlainReferences(db, referenceData);
plainImport(db, new Uint8Array(readFileSync(assetsFile!)));

const start = performance.now();
const columns = Object.entries(getTableColumns(assets)).filter(([field]) => field !== "environmentId");
const select = db.prepare(`SELECT ${columns.map(([field, column]) => `"${column.name}" AS "${field}"`).join(", ")} FROM assets WHERE environment_id = 1 ORDER BY id`);
const writer = Bun.file(join(dir!, "assets.ndjson")).writer();
let records = 0;
let bytes = 0;
// Lines gathered into text of about a megabyte per write: a write per line made the baseline slower (1,986 ms against
// 1,133 ms, one run each on a busy machine), which would flatter importd.
let text = "";
// The rows taken whole, as the simplest plain script would (importd reads slices, to keep its memory flat).
for (const row of select.all() as Array<Record<string, unknown>>) {
  text += `${JSON.stringify({ ...assetResource.fromRow(row), updatedAt: row.updatedAt, lastJobId: row.lastJobId })}\n`;
  records++;
  if (text.length >= 1 << 20) {
    writer.write(text);
    bytes += text.length;
    text = "";
  }
}
writer.write(text);
bytes += text.length;
await writer.end();
const ms = performance.now() - start;
db.close();
console.log(JSON.stringify({ ms, records, bytes }));
