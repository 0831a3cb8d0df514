import type { TObject } from "@sinclair/typebox";
// csv-rows.ts, or in a browser bundle csv-rows.browser.ts (package.json "imports").
import { csvRows } from "#csv-rows";
import { isImportdFile, restoredCell } from "../resources/spreadsheet-cell";
import { isCsvSyntaxError, type LineEnding } from "./csv-dialect";
import { fieldPaths, isMeta, isNote } from "./fields";
import { numberCellProblem } from "./number-cell";
import { SourceProblemCode } from "./problems";
import { SourceError, textOf, type InputFile } from "./text";
import { sourceError } from "./words";

/**
 * Reads an input file record by record, streaming, so that memory stays bounded whatever its size.
 * JSON arrays, NDJSON and CSV with a header row; each record comes with where it stood in the file.
 */

export { SourceError };

export const formats = ["csv", "ndjson", "json"] as const;
export type Format = (typeof formats)[number];

/**
 * `line` for CSV and NDJSON (1-based), `index` for a JSON array (0-based). `cells` keeps a CSV row's data as it was
 * (whatever its length; a rejected file's `_error` and `_line` left out);
 * `raw`, the text of a JSON line or element that could not be read, so that the rejected file gives it back.
 */
export type SourceRecord = { record?: Record<string, unknown>; problem?: string; line?: number; index?: number; cells?: string[]; raw?: string };

/** `line 12` or `index 3`: where a record stood in its file. */
export const where = (source: SourceRecord) => (source.line !== undefined ? `line ${source.line}` : `index ${source.index}`);

/**
 * How a CSV file is read, and its rejected file written: what the survey found (or --delimiter said). `bom`: it
 * starts with a UTF-8 byte order mark (Excel's "CSV UTF-8"); `quoted`: every cell of its header is in quotes, as
 * in a file written with every cell quoted.
 */
export type CsvDialect = { delimiter: string; lineEnding: LineEnding | undefined; headers: string[]; bom: boolean; quoted: boolean };

/** The format of `path` by its name (`.tsv` is CSV with tabs), or a SourceError that names --format. */
export function formatOf(path: string): Format {
  const name = path.slice(path.lastIndexOf("/") + 1);
  const dot = name.lastIndexOf(".");
  const extension = dot > 0 ? name.slice(dot).toLowerCase() : "";
  if (extension === ".csv" || extension === ".tsv") return "csv";
  if (extension === ".ndjson" || extension === ".jsonl") return "ndjson";
  if (extension === ".json") return "json";
  throw sourceError({ code: SourceProblemCode.FormatUnknown, path });
}

/** `onBytes` hears how much of the file has been read, for progress and the time left. */
export async function* readSource(file: InputFile, format: Format, schema: TObject, csv?: CsvDialect, onBytes?: (bytes: number) => void): AsyncGenerator<SourceRecord> {
  const text = textOf(file, onBytes);
  if (format === "csv") yield* readCsv(text, file.name, schema, csv!);
  else if (format === "ndjson") yield* readNdjson(text);
  else yield* readJsonArray(text, file.name);
}

/** A text's lines as it streams in, without their line ends (LF, or CRLF). */
export class LineSplitter {
  private rest = "";

  /** The lines `chunk` completes. */
  push(chunk: string): string[] {
    const text = this.rest + chunk;
    const lines: string[] = [];
    let from = 0;
    for (let end = text.indexOf("\n"); end !== -1; end = text.indexOf("\n", from)) {
      lines.push(text.charCodeAt(end - 1) === 0x0d ? text.slice(from, end - 1) : text.slice(from, end));
      from = end + 1;
    }
    this.rest = text.slice(from);
    return lines;
  }

  /** The last line, after the last line end (empty when the text ends with one). */
  end(): string {
    return this.rest.endsWith("\r") ? this.rest.slice(0, -1) : this.rest;
  }
}

/** Each line of `text`, numbered from 1, the one after the last line end included (empty when the text ends with one). */
export async function* numberedLines(text: AsyncIterable<string>): AsyncGenerator<{ line: number; content: string }> {
  const lines = new LineSplitter();
  let line = 0;
  for await (const chunk of text) for (const content of lines.push(chunk)) yield { line: ++line, content };
  yield { line: ++line, content: lines.end() };
}

export async function* readNdjson(text: AsyncIterable<string>): AsyncGenerator<SourceRecord> {
  for await (const { line, content } of numberedLines(text)) {
    const source = content.trim() === "" ? undefined : readObject(content, "line", { line });
    if (source) yield source;
  }
}

/**
 * One NDJSON line or JSON array element: a record, or what is wrong with it (with its text, for the rejected
 * file), or undefined for a note: an object of `_` fields alone, as a rejected file writes before a line it
 * gives back as it was.
 */
function readObject(text: string, what: "line" | "element", where: Pick<SourceRecord, "line" | "index">): SourceRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { ...where, problem: `this ${what} is not valid JSON (${(error as Error).message})`, raw: text };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return { ...where, problem: `this ${what} is not a JSON object`, raw: text };
  if (isNote(value)) return undefined;
  const record = value as Record<string, unknown>;
  for (const name in record) if (isMeta(name)) delete record[name];
  return { ...where, record };
}

/**
 * Splits a top-level JSON array into its elements' texts as the text streams in, tracking strings and depth.
 * Inside a string it jumps to the next quote (an escaped one is preceded by an odd number of backslashes), and it
 * looks at character codes, not one-character strings: this runs over every byte of the file, twice (survey.ts).
 */
export class JsonArraySplitter {
  private depth = 0;
  private inString = false;
  private started = false;
  private ended = false;
  private element = "";
  /** Backslashes just before the end of the previous chunk: they decide whether a quote at the start of this one is escaped. */
  private backslashes = 0;

  constructor(private readonly path: string) {}

  /** The elements `chunk` completes, as text (white space around them kept). */
  push(chunk: string): string[] {
    const elements: string[] = [];
    if (this.ended) return elements;
    let from = 0;
    let i = 0;
    if (!this.started) {
      const first = chunk.search(/\S/);
      if (first === -1) return elements;
      if (chunk[first] !== "[") throw sourceError({ code: SourceProblemCode.NotAJsonArray, path: this.path });
      this.started = true;
      this.depth = 1;
      i = from = first + 1;
    }
    while (i < chunk.length) {
      if (this.inString) {
        const quote = chunk.indexOf('"', i);
        if (quote === -1) {
          this.backslashes = backslashesBefore(chunk, chunk.length, this.backslashes);
          break;
        }
        if (backslashesBefore(chunk, quote, this.backslashes) % 2 === 0) this.inString = false;
        this.backslashes = 0;
        i = quote + 1;
        continue;
      }
      const c = chunk.charCodeAt(i++);
      if (c === 0x22) this.inString = true;
      else if (c === 0x7b || c === 0x5b) this.depth++;
      else if (c === 0x7d || c === 0x5d) {
        if (--this.depth === 0) {
          elements.push(this.element + chunk.slice(from, i - 1));
          this.element = "";
          this.ended = true;
          return elements;
        }
      } else if (c === 0x2c && this.depth === 1) {
        elements.push(this.element + chunk.slice(from, i - 1));
        this.element = "";
        from = i;
      }
    }
    this.element += chunk.slice(from);
    return elements;
  }

  /** The end of the text: the array must have been closed. */
  end(): void {
    if (!this.ended) throw new SourceError(`${this.path} ends before its JSON array is closed: the file is cut short, or a bracket or quote is missing`);
  }
}

/**
 * Each element of the JSON array `text` (the file `path`), trimmed, numbered from 0, blank ones left out; throws once
 * the text has ended if the array was not closed.
 */
export async function* jsonArrayElements(text: AsyncIterable<string>, path: string): AsyncGenerator<{ index: number; content: string }> {
  const splitter = new JsonArraySplitter(path);
  let index = 0;
  for await (const chunk of text) {
    for (const element of splitter.push(chunk)) {
      const content = element.trim();
      if (content !== "") yield { index: index++, content };
    }
  }
  splitter.end();
}

export async function* readJsonArray(text: AsyncIterable<string>, path: string): AsyncGenerator<SourceRecord> {
  for await (const { index, content } of jsonArrayElements(text, path)) {
    const source = readObject(content, "element", { index });
    if (source) yield source;
  }
}

/** How many backslashes stand right before `end` in `text`; a run that reaches its start goes on from `carried`, the previous chunk's. */
function backslashesBefore(text: string, end: number, carried: number): number {
  let count = 0;
  while (end - count > 0 && text.charCodeAt(end - count - 1) === 0x5c) count++;
  return count === end ? count + carried : count;
}

/** The CSV reader's error as the user's, with the line. The survey (CsvStructure) finds these first, unless the file changed since. */
function csvProblem(path: string, error: Error & { lines?: number }): SourceError {
  const what = error.message.replace(/^[^:]+: /, "").slice(0, 200);
  return new SourceError(`${path} line ${error.lines ?? "?"}: the CSV cannot be read (${what}).`);
}

/**
 * Which of a row's cells are data, and which are notes (a rejected file's `_error` and `_line`, columns named `_…`).
 * A row as long as the header has its notes where the header has them. A row of another length (a stray delimiter,
 * a cell missing) keeps them where importd wrote them, at its end: the header's trailing notes are its last cells,
 * so that they are never counted as data, nor carried as data into the next rejected file (issue 44).
 */
export function dataCellsOf(headers: readonly string[]): (cells: string[]) => string[] {
  const notes = headers.map(isMeta);
  if (!notes.includes(true)) return (cells) => cells;
  let trailing = 0;
  while (trailing < headers.length && notes[headers.length - 1 - trailing]) trailing++;
  const leading = headers.length - trailing;
  return (cells) => {
    if (cells.length === headers.length) return cells.filter((_, column) => !notes[column]);
    const body = cells.length > trailing ? cells.slice(0, cells.length - trailing) : cells;
    return body.filter((_, column) => column >= leading || !notes[column]);
  };
}

/** The line breaks inside a row's cells as a text editor counts them (CRLF, LF or CR alone: one each), and its CRLFs. */
function lineBreaksIn(cells: string[]): { breaks: number; crlfs: number } {
  let breaks = 0;
  let crlfs = 0;
  for (const cell of cells) {
    for (let at = cell.search(/[\r\n]/); at !== -1 && at < cell.length; at++) {
      const c = cell.charCodeAt(at);
      if (c === 0x0d && cell.charCodeAt(at + 1) === 0x0a) (crlfs++, breaks++, at++);
      else if (c === 0x0d || c === 0x0a) breaks++;
    }
  }
  return { breaks, crlfs };
}

async function* readCsv(text: AsyncIterable<string>, path: string, schema: TObject, { delimiter, lineEnding, headers }: CsvDialect): AsyncGenerator<SourceRecord> {
  const { numbers } = fieldPaths(schema);
  // The data columns alone: a rejected file's notes are not the record's, and its rows are read without them.
  const columns = headers.filter((header) => !isMeta(header)).map((header) => ({ header, skip: header === "", number: numbers.has(header), parts: header.split(".") }));
  const dataCells = dataCellsOf(headers);
  const counted = columns.length === headers.length ? "" : ` besides ${headers.filter(isMeta).join(" and ")}`;
  // importd's own rejected file: its cells were neutralized for spreadsheets, and are read as the values they stand for.
  const restore = isImportdFile(headers);
  let parsedEnd = 0;
  let crlfsInCells = 0;
  let header = true;
  try {
    for await (const { record: read, info } of csvRows(text, { delimiter, lineEnding })) {
      // A row's line is where it starts, as a text editor (and grep -n) counts: csv-parse counts a CRLF inside a
      // quoted cell as two lines, and tells where a row ends. Only a row that spans lines (or follows empty ones)
      // can hold a line break: the others, nearly all, are not looked into.
      let breaks = 0;
      if (info.lines - parsedEnd > 1) {
        const inCells = lineBreaksIn(read);
        crlfsInCells += inCells.crlfs;
        breaks = inCells.breaks;
      }
      parsedEnd = info.lines;
      const line = info.lines - crlfsInCells - breaks;
      const cells = dataCells(restore ? read.map(restoredCell) : read);
      if (header) {
        header = false;
        continue;
      }
      if (cells.length !== columns.length) {
        yield { line, cells, problem: `this row has ${cells.length} cells; the header row has ${columns.length}${counted}` };
        continue;
      }
      // Dotted headers become nested fields; empty cells are absent; number columns become numbers, and a cell
      // there that is not one makes the row unreadable, said in a spreadsheet's words (number-cell.ts).
      const record: Record<string, unknown> = {};
      let problem: string | undefined;
      for (let column = 0; column < columns.length; column++) {
        const cell = cells[column]!;
        const { header, skip, number, parts } = columns[column]!;
        if (skip || cell === "") continue;
        let value: unknown = cell;
        if (number) {
          value = Number(cell);
          if (cell.trim() === "" || !Number.isFinite(value)) {
            problem = problem === undefined ? numberCellProblem(header, cell) : `${problem.slice(0, -1)}; ${numberCellProblem(header, cell)}`;
            continue;
          }
        }
        let target = record;
        for (let part = 0; part < parts.length - 1; part++) target = (target[parts[part]!] ??= {}) as Record<string, unknown>;
        target[parts.at(-1)!] = value;
      }
      yield problem === undefined ? { line, cells, record } : { line, cells, problem };
    }
  } catch (error) {
    throw isCsvSyntaxError(error) ? csvProblem(path, error) : error;
  }
}
