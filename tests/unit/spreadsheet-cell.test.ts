import { describe, expect, test } from "bun:test";
import { isImportdFile, neutralizedCell, neutralizedNote, restoredCell } from "../../src/resources/spreadsheet-cell";

describe("a rejected file's cells, neutralized for spreadsheets and read back exactly", () => {
  test("a cell a spreadsheet would run as a formula gets a quote before it: =, +, -, @, tab, carriage return", () => {
    expect(["=1+2", "+1", "-5", "-1+2", "@SUM(A1)", "\tx", "\rx", '=HYPERLINK("http://x","y")'].map(neutralizedCell)).toEqual([
      "'=1+2",
      "'+1",
      "'-5",
      "'-1+2",
      "'@SUM(A1)",
      "'\tx",
      "'\rx",
      `'=HYPERLINK("http://x","y")`,
    ]);
  });

  test("a cell that starts with a quote gets one more, so that reading back is unambiguous", () => {
    expect(neutralizedCell("'abc")).toBe("''abc");
    expect(neutralizedCell("'")).toBe("''");
    expect(neutralizedCell("''=x")).toBe("'''=x");
  });

  test("any other cell is left as it is", () => {
    for (const cell of ["", "abc", "1.5", "a=b", "a-b", " =x", "é=", "5-", "LR-1"]) expect(neutralizedCell(cell)).toBe(cell);
  });

  test("read back, one leading quote comes off: every value is restored exactly", () => {
    expect(["'=1+2", "'-5", "''abc", "''", "abc", ""].map(restoredCell)).toEqual(["=1+2", "-5", "'abc", "'", "abc", ""]);
    for (const value of ["", "'", "''", "'''", "=1+2", "'=1+2", "-5", "-0.5e3", "+1", "@a", "\t", "\r\n", "'abc", "abc", "a'b", " -x", "=", "-"]) {
      expect({ value, back: restoredCell(neutralizedCell(value)) }).toEqual({ value, back: value });
    }
  });

  test("a note (_error) is neutralized where it must be, and keeps a quote it starts with", () => {
    expect(neutralizedNote("=1+2 is not a number")).toBe("'=1+2 is not a number");
    expect(neutralizedNote("'Name' must not be empty.")).toBe("'Name' must not be empty.");
  });

  test("importd's own rejected file is told by its _error column", () => {
    expect(isImportdFile(["id", "name", "_error", "_line"])).toBe(true);
    expect(isImportdFile(["id", "name", "_error", "_index"])).toBe(true);
    expect(isImportdFile(["id", "name"])).toBe(false);
  });
});
