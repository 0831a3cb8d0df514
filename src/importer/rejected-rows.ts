// csv-stringify's build for browsers (its Node build needs Buffer), which runs in Bun as well: the CLI's rejected file
// and the console's download are written by this one piece of code.
import { stringify } from "csv-stringify/browser/esm/sync";
import type { CsvDialect, Format, SourceRecord } from "./source";
import { isMeta } from "./fields";
import { neutralizedCell, neutralizedNote } from "../resources/spreadsheet-cell";

/**
 * The name of the rejected file of a file named `name` (no folder): `assets.csv` → `assets.rejected.csv`; the `n`th
 * choice `assets.rejected-2.csv`; `tag` before it, as the console's `assets.dry-run.rejected.csv`. The extension as
 * node:path's extname takes it: from the last dot, unless the name starts there.
 */
export function rejectedFileName(name: string, { n = 1, tag = "" }: { n?: number; tag?: string } = {}): string {
  const dot = name.lastIndexOf(".");
  const [stem, extension] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ""];
  return `${stem}${tag}.rejected${n === 1 ? "" : `-${n}`}${extension}`;
}

/**
 * The text of a rejected file: the records that were not applied, in the input's own format, each with its reason
 * (`_error`) and where it stood in the input (`_line`, or `_index` for a JSON array), so that a person can fix them
 * there and import that file. A CSV is written as the input was (delimiter, line ending, byte order mark, every
 * cell quoted or not: a `;` file from a European Excel opens there as columns again). It keeps the input's columns
 * (those importd adds, `_…`, are written afresh) and each row's cells as they were, whatever their number,
 * neutralized for spreadsheets (spreadsheet-cell.ts), which the importer undoes when it reads the file back.
 */
export class RejectedRows {
  private rows = 0;
  private readonly csvOptions: { delimiter: string; record_delimiter: string; quoted: boolean; quoted_match: RegExp };

  /** `csv`: how the input CSV is written, which its rejected file follows, so that it opens as the input did. */
  constructor(
    private readonly format: Format,
    private readonly csv?: CsvDialect,
  ) {
    // csv-stringify quotes a cell that holds its own record delimiter only: a cell with an LF in a CRLF file (or a
    // CR in an LF one) must be quoted too, or it would end the row there.
    this.csvOptions = { delimiter: csv?.delimiter ?? ",", record_delimiter: csv?.lineEnding ?? "\n", quoted: csv?.quoted ?? false, quoted_match: /[\r\n]/ };
  }

  get count(): number {
    return this.rows;
  }

  /**
   * The text for one rejected record, with the file's start before the first. `text` is the record as JSON, for a
   * record that is no longer held parsed. A JSON line or element that could not be read comes back as it was
   * (`source.raw`), after a note that says why: fixed there, it is read again.
   */
  add(source: SourceRecord, error: string, text?: string): string {
    const start = this.rows++ === 0 ? this.start() : "";
    if (this.format === "csv") {
      // The row's data cells as they were, however many (a stray delimiter, a cell missing): never padded or cut.
      const cells = source.cells ?? [];
      return start + stringify([[...cells.map(neutralizedCell), neutralizedNote(error), String(source.line ?? "")]], this.csvOptions);
    }
    const where = this.format === "json" ? { _index: source.index } : { _line: source.line };
    const lines =
      source.raw !== undefined
        ? [JSON.stringify({ _error: `${error}. It follows as it was: fix it there.`, ...where }), source.raw]
        : [JSON.stringify({ ...(source.record ?? (text === undefined ? {} : JSON.parse(text))), _error: error, ...where })];
    return start + lines.map((line, at) => (this.format === "json" ? `${start && at === 0 ? "" : ",\n"}${line}` : `${line}\n`)).join("");
  }

  /** What closes the file, once every record is in (nothing if there were none). */
  end(): string {
    return this.rows > 0 && this.format === "json" ? "\n]\n" : "";
  }

  private start(): string {
    if (this.format === "csv") {
      const headers = [...(this.csv?.headers ?? []).filter((header) => !isMeta(header)), "_error", "_line"];
      return (this.csv?.bom ? "\uFEFF" : "") + stringify([headers.map(neutralizedCell)], this.csvOptions);
    }
    return this.format === "json" ? "[\n" : "";
  }
}
