import { parse } from "csv-parse";
import { Readable } from "node:stream";
import { csvParseOptions, type CsvRow, type CsvRowOptions } from "./csv-dialect";

/**
 * A CSV text's rows as it streams, each with the line it ends on: csv-parse's Node build, for the CLI, iterated as it
 * is (no generator in between: this runs for every row of a file of millions). In a browser bundle, `#csv-rows` is
 * csv-rows.browser.ts instead (package.json "imports"): the same rows from csv-parse's browser build
 * (tests/unit/importer-files.test.ts holds the two to the same rows).
 */
export function csvRows(text: AsyncIterable<string>, options: CsvRowOptions): AsyncIterable<CsvRow> {
  return Readable.from(text).pipe(parse(csvParseOptions(options)));
}
