// Baselines for rows 1, 2, 6 and 8: a plain script importing the same bytes, in its own process so that its
// peak RSS is its own; with `durable`, the durable floor instead (see lib/plain.ts, durableImport).
// Usage: bun plain-import.ts <body.json> <dir> [durable]   Prints one JSON line.
import { join } from "node:path";
import { referenceData } from "../lib/data";
import { durableImport, openPlainDatabase, peakRss, plainImport, seedPlainReferences } from "../lib/plain";

const [bodyFile, dir, kind] = process.argv.slice(2);
const db = openPlainDatabase(join(dir!, "plain.sqlite"));
seedPlainReferences(db, referenceData);

const timed = async () => {
  const start = performance.now();
  const bytes = new Uint8Array(require("node:fs").readFileSync(bodyFile!));
  const written = kind === "durable" ? await durableImport(db, bytes) : plainImport(db, bytes);
  return { ms: performance.now() - start, written };
};
const empty = await timed();
const update = await timed();
db.close();
console.log(JSON.stringify({ emptyMs: empty.ms, updateMs: update.ms, written: empty.written, peakRssBytes: peakRss() }));
