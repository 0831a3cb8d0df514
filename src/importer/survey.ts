import { isImportdFile, restoredCell } from "../resources/spreadsheet-cell";
import type { ResourceDefinition } from "../resources/definition";
import { CsvStructure, delimiterName, delimiters, detectDelimiter, firstRecord, splitRecord } from "./csv-dialect";
import { fieldPaths, isMeta, isNote, nearestField, shown } from "./fields";
import { JsonArraySplitter, LineSplitter, type CsvDialect, type Format } from "./source";
import { SourceProblemCode, type UnknownField } from "./problems";
import { SourceError, textOf, type InputFile } from "./text";
import { sourceError } from "./words";

/**
 * The first read of a file, before anything is sent (DECISIONS 12: what the file says is what is imported, or
 * the user is told). It reads the whole file once, streaming, and stops with a SourceError naming the line for
 * what would make the import go wrong quietly: text that is not UTF-8, a CSV whose delimiter cannot be told,
 * a header that names no field or lacks a required one, a quote out of place, mixed line endings. It finds the
 * fields the resource does not define (which the server would ignore), and counts the records, so that the
 * import knows its total from the start. A CSV's cells are not parsed here, only its structure: about 1.5 s
 * a GB; a JSON file's records are, to see their fields.
 */

export type { UnknownField };
export type Survey = { records: number; csv?: CsvDialect; unknown: UnknownField[] };

/** How much of a CSV file's start is read to find its header row. */
const headLimit = 1024 * 1024;

export async function surveyFile(file: InputFile, format: Format, resource: ResourceDefinition, options: { delimiter?: string } = {}): Promise<Survey> {
  return format === "csv" ? surveyCsv(file, resource, options.delimiter) : surveyJson(file, format, resource);
}

async function surveyCsv(file: InputFile, resource: ResourceDefinition, wanted: string | undefined): Promise<Survey> {
  const path = file.name;
  let head = "";
  let header: string | undefined;
  for await (const text of textOf(file)) {
    head += text;
    header = firstRecord(head);
    if (header !== undefined || head.length > headLimit) break;
  }
  header ??= head.length > headLimit ? undefined : head;
  if (header === undefined) throw sourceError({ code: SourceProblemCode.FirstLineTooLong, path });
  if (head === "") throw new SourceError(`${path} is empty: importd needs a header row that names the columns, then a row per record.`);
  if (header.trim() === "") throw new SourceError(`${path} has no header row: its first line is empty. importd needs a first row that names the columns (${fieldPaths(resource.schema).leaves.slice(0, 4).join(", ")}, …).`);

  const paths = fieldPaths(resource.schema);
  const isField = (cell: string) => paths.leaves.includes(cell) || isMeta(cell);
  const delimiter = wanted ?? chooseDelimiter(path, header, resource, isField);
  const named = splitRecord(header, delimiter).map((cell) => cell.trim());
  // importd's own rejected file neutralized its column names as its other cells (spreadsheet-cell.ts).
  const headers = isImportdFile(named) ? named.map(restoredCell) : named;
  checkHeader(path, headers, delimiter, header, resource, isField);

  const structure = new CsvStructure(path, delimiter);
  for await (const text of textOf(file)) structure.scan(text);
  structure.end();
  const unknown = headers.flatMap((name, column): UnknownField[] =>
    isField(name) ? [] : [{ name: name === "" ? `(column ${column + 1} has no name)` : name, where: `line 1, column ${column + 1}`, suggestion: nearestField(name, paths.leaves) }],
  );
  const csv = { delimiter, lineEnding: structure.lineEnding, headers, bom: await startsWithBom(file), quoted: everyCellQuoted(header, delimiter) };
  return { records: Math.max(0, structure.records - 1), csv, unknown };
}

/** Whether the file starts with UTF-8's byte order mark, which textOf drops: its rejected file gets one too. */
async function startsWithBom(file: InputFile): Promise<boolean> {
  for await (const chunk of file.read()) return chunk[0] === 0xef && chunk[1] === 0xbb && chunk[2] === 0xbf;
  return false;
}

/** Whether every cell of a record is in quotes (white space around them aside). */
export function everyCellQuoted(record: string, delimiter: string): boolean {
  let quoted = false;
  let cellStart = 0;
  for (let i = 0; i <= record.length; i++) {
    const char = record[i];
    if (char === '"') quoted = !quoted;
    else if (!quoted && (char === delimiter || i === record.length)) {
      if (!record.slice(cellStart, i).trim().startsWith('"')) return false;
      cellStart = i + 1;
    }
  }
  return true;
}

/** The delimiter whose header cells name the most fields, or failing that, come nearest to names of fields. */
function chooseDelimiter(path: string, header: string, resource: ResourceDefinition, isField: (cell: string) => boolean): string {
  // A header of one cell (`id`, in a file of ids to delete) reads alike with every delimiter: none is needed.
  if (!delimiters.some((delimiter) => header.includes(delimiter))) return ",";
  const { leaves } = fieldPaths(resource.schema);
  for (const matches of [isField, (cell: string) => nearestField(cell, leaves) !== undefined]) {
    const { delimiter, tied } = detectDelimiter(header, matches);
    if (delimiter) return delimiter;
    if (tied.length > 1) throw sourceError({ code: SourceProblemCode.DelimiterTied, path, tied });
  }
  throw notAHeader(path, header, resource);
}

const notAHeader = (path: string, header: string, resource: ResourceDefinition, delimiter?: string) =>
  sourceError({ code: SourceProblemCode.NotAHeader, path, resource: resource.path, header, delimiter, fields: fieldPaths(resource.schema).leaves });

function checkHeader(path: string, headers: string[], delimiter: string, header: string, resource: ResourceDefinition, isField: (cell: string) => boolean): void {
  const { required, leaves } = fieldPaths(resource.schema);
  const named = (name: string) => (isField(name) && !isMeta(name)) || nearestField(name, leaves) !== undefined;
  if (!headers.some(named)) {
    const better = delimiters.find((other) => other !== delimiter && splitRecord(header, other).some((cell) => named(cell.trim())));
    if (better) throw sourceError({ code: SourceProblemCode.DelimiterWrong, path, resource: resource.path, delimiter, better });
    throw notAHeader(path, header, resource, delimiter);
  }
  const columns = new Map<string, number[]>();
  headers.forEach((name, column) => name !== "" && columns.set(name, [...(columns.get(name) ?? []), column + 1]));
  for (const [name, at] of columns) {
    if (at.length > 1) throw new SourceError(`${path} line 1: the column ${shown(name)} appears ${at.length} times (columns ${at.join(", ")}), and importd cannot tell which to import. Rename or remove all but one.`);
  }
  const missing = required.filter((field) => !columns.has(field));
  if (missing.length > 0) {
    const unknown = headers.filter((name) => !isField(name));
    const meant = missing.flatMap((field) => {
      const near = unknown.find((name) => nearestField(name, [field]) === field);
      return near ? [`${shown(near)} for ${field}?`] : [];
    });
    throw new SourceError(
      `${path} line 1: the header${delimiter === "," ? "" : ` (read with ${delimiterName(delimiter)} between cells)`} has no column for ${missing.join(", ")}, ${missing.length === 1 ? "a field" : "fields"} every ${resource.noun} must have, so every row would be rejected. ` +
        `Add ${missing.length === 1 ? "the column" : "the columns"}${meant.length > 0 ? ` (did you mean ${meant.join(" ")})` : ""}. The fields of ${resource.path}: ${leaves.join(", ")}.`,
    );
  }
}

async function surveyJson(file: InputFile, format: Format, resource: ResourceDefinition): Promise<Survey> {
  const paths = fieldPaths(resource.schema);
  const unknown = new Map<string, UnknownField>();
  const note = (name: string, where: string) => {
    const seen = unknown.get(name);
    if (seen) seen.count!++;
    else unknown.set(name, { name, where, count: 1, suggestion: nearestField(name, paths.all) });
  };
  // `for…in` and no arrays of entries: this runs for every record of the file before anything is sent.
  const check = (record: Record<string, unknown>, where: string) => {
    for (const name in record) {
      if (isMeta(name)) continue;
      if (!paths.all.has(name)) {
        note(name, where);
        continue;
      }
      const value = record[name];
      if (value === null || typeof value !== "object" || Array.isArray(value)) continue;
      for (const inner in value) if (!isMeta(inner) && !paths.all.has(`${name}.${inner}`)) note(`${name}.${inner}`, where);
    }
  };
  let records = 0;
  /** One line or element: a record (or an unreadable one, rejected when read again), or a rejected file's note. */
  const one = (text: string, where: string) => {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      records++;
      return;
    }
    if (value === null || typeof value !== "object" || Array.isArray(value)) records++;
    else if (!isNote(value)) {
      records++;
      check(value as Record<string, unknown>, where);
    }
  };
  // Parsed straight from the text: reading the records through readSource's generator took three times as long.
  if (format === "ndjson") {
    const lines = new LineSplitter();
    let line = 0;
    const nextLine = (text: string) => {
      line++;
      if (text.trim() !== "") one(text, `line ${line}`);
    };
    for await (const chunk of textOf(file)) lines.push(chunk).forEach(nextLine);
    nextLine(lines.end());
  } else {
    const splitter = new JsonArraySplitter(file.name);
    let index = 0;
    for await (const chunk of textOf(file)) {
      for (const element of splitter.push(chunk)) {
        if (element.trim() !== "") one(element, `index ${index++}`);
      }
    }
    splitter.end();
  }
  return { records, unknown: [...unknown.values()] };
}

/** The fields the resource does not define, found by the survey, as the error that stops the import. */
export const unknownFieldsError = (path: string, resource: ResourceDefinition, unknown: UnknownField[], format: Format) =>
  sourceError({ code: SourceProblemCode.UnknownFields, path, resource: resource.path, kind: format === "csv" ? "column" : "field", unknown });
