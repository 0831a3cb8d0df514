// Baseline for rows d1 and d2: a plain script deleting records in one transaction, with nothing else (no job, no
// tombstones, no reference check): what the delete rows are measured against.
// Usage: bun plain-delete.ts <assets.json> <ids.json> <dir> [mirror|tombstones]   Imports the assets untimed, then
// times reading the ids and deleting them; with `mirror`, the ids are those a source still has, and the script deletes
// every other asset (the mirror's deletes, the plain way: one statement against the ids); with `tombstones` (row d1t),
// each deleted asset also leaves a tombstone, one INSERT an id into importd's own tombstones table (its migrations made
// it), numbered as the script goes. Prints one JSON line.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { referenceData } from "../lib/data";
import { openPlainDatabase, plainImport, seedPlainReferences } from "../lib/plain";

const [assetsFile, idsFile, dir, kind] = process.argv.slice(2);
const db = openPlainDatabase(join(dir!, "plain.sqlite"));
seedPlainReferences(db, referenceData);
plainImport(db, new Uint8Array(readFileSync(assetsFile!)));

const start = performance.now();
const ids = JSON.parse(readFileSync(idsFile!, "utf8")) as unknown[];
if (!ids.every((id) => typeof id === "string" && id.length > 0 && id.length <= 64)) throw new Error("the ids file holds something other than ids");
let deleted = 0;
if (kind === "mirror") {
  const others = db.prepare("DELETE FROM assets WHERE environment_id = 1 AND id NOT IN (SELECT value FROM json_each(?))");
  db.transaction(() => void (deleted = others.run(JSON.stringify(ids)).changes))();
} else if (kind === "tombstones") {
  const remove = db.prepare("DELETE FROM assets WHERE environment_id = 1 AND id = ?");
  const leave = db.prepare("INSERT INTO tombstones (environment_id, resource, id, position, job_id, deleted_at) VALUES (1, 'assets', ?, ?, 1, ?)");
  const deletedAt = new Date().toISOString();
  db.transaction(() => {
    for (const id of ids as string[]) if (remove.run(id).changes > 0) leave.run(id, ++deleted, deletedAt);
  })();
} else {
  const remove = db.prepare("DELETE FROM assets WHERE environment_id = 1 AND id = ?");
  db.transaction(() => {
    for (const id of ids as string[]) deleted += remove.run(id).changes;
  })();
}
const ms = performance.now() - start;
db.close();
console.log(JSON.stringify({ ms, deleted }));
