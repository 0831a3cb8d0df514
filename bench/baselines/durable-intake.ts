// Baseline for row 3: what accepting a batch costs at the least — parse, validate, and write the same bytes
// durably (write + fsync of a file). Usage: bun durable-intake.ts <body.json> <dir> <runs> [warm-up runs]   The warm-up
// runs come first, untimed in the result's `times` (their own times are `warmUpTimes`). Prints one JSON line.
import { closeSync, fsyncSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { parseAndValidate } from "../lib/plain";

const [bodyFile, dir, runs, warmUp = "0"] = process.argv.slice(2);
const bytes = new Uint8Array(readFileSync(bodyFile!));
const times: number[] = [];
for (let run = 0; run < Number(warmUp) + Number(runs); run++) {
  const file = join(dir!, `intake-${run}.json`);
  const start = performance.now();
  parseAndValidate(bytes);
  const fd = openSync(file, "w");
  writeSync(fd, bytes);
  fsyncSync(fd);
  closeSync(fd);
  times.push(performance.now() - start);
  unlinkSync(file);
}
console.log(JSON.stringify({ times: times.slice(Number(warmUp)), warmUpTimes: times.slice(0, Number(warmUp)) }));
