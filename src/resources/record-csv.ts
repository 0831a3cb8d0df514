// Stored records as CSV in the importer's own column layout (an export, DECISIONS 14): one column per field the
// resource defines, dotted for nested ones (`geolocation.locationStart`), as `importd import` reads them; then
// updatedAt and lastJobId, which the importer reads as notes (importer/fields.ts). Cells are neutralized for spreadsheets as
// a rejected file's are (spreadsheet-cell.ts), and the importer restores them: lastJobId marks importd's own file.
import type { ResourceDefinition } from "./definition";
import { fieldPaths } from "./field-paths";
import { neutralizedCell } from "./spreadsheet-cell";

/** The columns a stored record adds to its resource's fields. */
export const storedColumns = ["updatedAt", "lastJobId"] as const;

const needsQuotes = /[",\r\n]/;

/** A cell as RFC 4180 writes it: quoted (its quotes doubled) when it holds a quote, a comma or a line break. */
const quoted = (cell: string) => (needsQuotes.test(cell) ? `"${cell.replaceAll('"', '""')}"` : cell);

/** Writes a resource's records as CSV lines (each ending in CRLF, as RFC 4180 and spreadsheets write them). */
export class RecordCsv {
  private readonly paths: string[][];
  readonly header: string;

  constructor(resource: ResourceDefinition) {
    const columns = [...fieldPaths(resource.schema).leaves, ...storedColumns];
    this.paths = columns.map((column) => column.split("."));
    this.header = `${columns.map((column) => quoted(neutralizedCell(column))).join(",")}\r\n`;
  }

  /** One record's line: an absent (or null) field is an empty cell, which the importer reads as absent. */
  line(record: Record<string, unknown>): string {
    let line = "";
    for (let column = 0; column < this.paths.length; column++) {
      const path = this.paths[column]!;
      let value: unknown = record[path[0]!];
      for (let part = 1; part < path.length && value !== null && value !== undefined; part++) value = (value as Record<string, unknown>)[path[part]!];
      if (column > 0) line += ",";
      if (value !== null && value !== undefined) line += quoted(neutralizedCell(String(value)));
    }
    return `${line}\r\n`;
  }
}
