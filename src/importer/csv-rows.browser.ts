import { parse } from "csv-parse/browser/esm";
import { csvParseOptions, type CsvRow, type CsvRowOptions } from "./csv-dialect";

/**
 * csv-rows.ts for a browser: csv-parse's browser build, whose stream (a polyfill) cannot be iterated, so it is
 * written to and read from directly. Its transform runs as each chunk is written; its last rows, and an error found
 * at the text's end, may come a tick after the end (a browser's polyfilled ticks are timers), so that is waited for.
 */
export async function* csvRows(text: AsyncIterable<string>, options: CsvRowOptions): AsyncGenerator<CsvRow> {
  const parser = parse(csvParseOptions(options));
  let failure: unknown;
  let ended = false;
  parser.on("error", (error: unknown) => (failure ??= error));
  parser.on("end", () => (ended = true));
  const read = function* (): Generator<CsvRow> {
    if (failure) throw failure;
    for (let row = parser.read() as CsvRow | null; row !== null; row = parser.read()) yield row;
  };
  let written = false;
  for await (const chunk of text) {
    if (chunk === "") continue;
    parser.write(chunk);
    written = true;
    yield* read();
  }
  // An empty text has no rows; ending the parser on one throws inside the browser build (its stream polyfill has no
  // `destroy`, which it would listen with).
  if (!written) return;
  parser.end();
  while (!ended && !failure) {
    yield* read();
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  yield* read();
}
