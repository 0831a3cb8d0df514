/**
 * A rejected file's CSV cells, safe to open in a spreadsheet and read back exactly (OWASP's CSV injection).
 *
 * A cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return would be run as a formula by Excel or
 * LibreOffice: it is written with a single quote before it (`=1+2` → `'=1+2`), which a spreadsheet shows as text. A
 * cell that starts with a quote already gets one more (`'abc` → `''abc`), so that the escape is unambiguous: reading
 * importd's own rejected file back (it has an `_error` column), one leading quote comes off every cell that has one,
 * and every value comes back as it was (`'=1+2` → `=1+2`, `''abc` → `'abc`, `'-5` → `-5`, a number again).
 * Negative numbers are escaped too, as OWASP says: a `-` cell is a formula to a spreadsheet (`-1+2` is one).
 */

const formulaStart = /^[=+\-@\t\r]/;

/** The cell as a rejected CSV file holds it. */
export function neutralizedCell(value: string): string {
  return formulaStart.test(value) || value.startsWith("'") ? `'${value}` : value;
}

/**
 * A note's cell (`_error`), which the importer never reads back: neutralized where a spreadsheet would run it, and
 * otherwise left as it is (a message that starts by quoting a field, `'Name' must not be empty.`, keeps its quote).
 */
export function neutralizedNote(value: string): string {
  return formulaStart.test(value) ? `'${value}` : value;
}

/** A cell of importd's own rejected file as the value it stands for. */
export function restoredCell(cell: string): string {
  return cell.startsWith("'") ? cell.slice(1) : cell;
}

/**
 * Whether a CSV with these column names is a file importd wrote, its cells then escaped as above: a rejected file (it
 * has an `_error` column) or an export (a `lastJobId` column, record-csv.ts).
 */
export const isImportdFile = (headers: readonly string[]) => headers.includes("_error") || headers.includes("lastJobId");
