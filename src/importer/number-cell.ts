import { shown } from "./fields";

/**
 * A CSV cell of a number column that is not a number, in a spreadsheet user's words (issue 44): the cell and its
 * value, and the likely cause with its fix. The server's own message for it ("'Start Point' must be a number. You
 * sent a string.") is right for an API caller, who sent JSON; a person who wrote 12,5 in a cell sent no string. So
 * the importer says it here, before sending, and the row is rejected as one that cannot be read.
 */
export function numberCellProblem(column: string, cell: string): string {
  const value = cell.trim();
  const start = `the ${column} cell is ${shown(cell)}, which is not a number`;
  // 12,5 or 1.234,5: a decimal comma (and points between thousands), as a spreadsheet in a European locale writes.
  const decimalComma = /^[+-]?\d{1,3}(\.\d{3})+,\d+$/.test(value) || (/^[+-]?\d*,\d+$/.test(value) && !/^[+-]?\d{1,3},\d{3}$/.test(value));
  if (decimalComma) {
    const fixed = value.replaceAll(".", "").replace(",", ".");
    return `${start}: a decimal comma, most likely. importd reads numbers with a decimal point: write ${fixed} (a spreadsheet saves it so when its decimal separator is '.').`;
  }
  // 1,234: a thousands separator, or a decimal comma; the cell cannot say which.
  if (/^[+-]?\d{1,3},\d{3}$/.test(value)) {
    return `${start}: write ${value.replace(",", "")} if the comma separates thousands, or ${value.replace(",", ".")} if it is a decimal comma.`;
  }
  // 1,234,567 or 1,234.5: commas between thousands.
  if (/^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$/.test(value)) return `${start}: write it without the commas between thousands, ${value.replaceAll(",", "")}.`;
  return `${start}: write a number, such as 12.5, or leave the cell empty.`;
}
