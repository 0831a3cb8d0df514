// The CSV of a job's rejected records, which `importd jobs rejected` prints and the console downloads: the same file
// either way, for a person to fix and import again. csv-stringify's build for browsers (its Node build needs Buffer),
// which runs in Bun as well.
import { stringify } from "csv-stringify/browser/esm/sync";
import type { RejectedRecord } from "../client";
import { neutralizedCell, neutralizedNote } from "../resources/spreadsheet-cell";

/**
 * A record's fields as CSV cells by column name: nested objects flattened into dotted names
 * (`geolocation.locationStart`), as `importd import` nests them back. A null is an empty cell (absent, to the
 * importer, as null is to the server); a list, which no CSV cell can hold as such, is its JSON text.
 */
function cellsOf(record: Record<string, unknown>, prefix = "", cells = new Map<string, string>()): Map<string, string> {
  for (const [name, value] of Object.entries(record)) {
    if (value !== null && typeof value === "object" && !Array.isArray(value)) cellsOf(value as Record<string, unknown>, `${prefix}${name}.`, cells);
    else cells.set(`${prefix}${name}`, value === null ? "" : typeof value === "object" ? JSON.stringify(value) : String(value));
  }
  return cells;
}

/** The CSV columns of rejected records: every field any of them has, in the order first met, then `_error` and `_index`. */
export class RejectedColumns {
  private readonly fields = new Set<string>();

  add(rejected: RejectedRecord): void {
    for (const name of cellsOf(rejected.record).keys()) this.fields.add(name);
  }

  get header(): string {
    return csvLine([...this.fields, "_error", "_index"]);
  }

  row(rejected: RejectedRecord): string {
    const cells = cellsOf(rejected.record);
    return csvLine([...[...this.fields].map((name) => cells.get(name) ?? ""), rejected.message, String(rejected.index)]);
  }
}

// One CSV line, quoted where a cell needs it; without its line end, which the output adds. Every cell is neutralized
// for spreadsheets as the importer reads it back, the notes (`_error`, `_index`: the last two) as notes
// (spreadsheet-cell.ts).
const csvLine = (cells: string[]) => stringify([cells.map((cell, at) => (at < cells.length - 2 ? neutralizedCell(cell) : neutralizedNote(cell)))]).replace(/\n$/, "");
