import type { TObject, TSchema } from "@sinclair/typebox";
import { parse } from "csv-parse";
import { createReadStream } from "node:fs";
import { Transform, type Readable } from "node:stream";
import { extname } from "node:path";
import { createInterface } from "node:readline";

/**
 * Reads an input file record by record, streaming, so that memory stays bounded whatever its size.
 * JSON arrays, NDJSON and CSV with a header row; each record comes with where it stood in the file.
 */

export type Format = "csv" | "ndjson" | "json";
/** `line` for CSV and NDJSON (1-based), `index` for a JSON array (0-based). `cells` keeps a CSV row as it was. */
export type SourceRecord = { record?: Record<string, unknown>; problem?: string; line?: number; index?: number; cells?: string[] };

export class SourceError extends Error {}

export function formatOf(path: string): Format {
  const extension = extname(path).toLowerCase();
  if (extension === ".csv") return "csv";
  if (extension === ".ndjson" || extension === ".jsonl") return "ndjson";
  if (extension === ".json") return "json";
  throw new SourceError(`cannot tell the format of '${path}': name it .csv, .ndjson (or .jsonl) or .json`);
}

/** Columns and fields whose names start with `_` (such as `_error` and `_line` of a rejected file) are not data. */
const isMeta = (name: string) => name.startsWith("_");

/** `onBytes` hears how much of the file has been read, for progress and the time left. */
export async function* readSource(path: string, format: Format, schema: TObject, onBytes: (bytes: number) => void = () => {}): AsyncGenerator<SourceRecord> {
  // Counted in the pipe: a 'data' listener would switch the file to flowing mode, and without
  // backpressure the whole file would be read into memory.
  const file = createReadStream(path).pipe(
    new Transform({
      transform(chunk: Buffer, _encoding, done) {
        onBytes(chunk.length);
        done(null, chunk);
      },
    }),
  );
  if (format === "csv") yield* readCsv(file, schema);
  else if (format === "ndjson") yield* readNdjson(file);
  else yield* readJsonArray(file, path);
}

async function* readNdjson(file: Readable): AsyncGenerator<SourceRecord> {
  let line = 0;
  for await (const text of createInterface({ input: file, crlfDelay: Infinity })) {
    line++;
    if (text.trim() === "") continue;
    yield { line, ...objectFrom(text, "line") };
  }
}

const withoutMeta = (value: Record<string, unknown>) => Object.fromEntries(Object.entries(value).filter(([key]) => !isMeta(key)));

/** One NDJSON line or JSON array element: a record, or what is wrong with it. */
function objectFrom(text: string, what: "line" | "element"): Pick<SourceRecord, "record" | "problem"> {
  try {
    const value = JSON.parse(text);
    if (value === null || typeof value !== "object" || Array.isArray(value)) return { problem: `this ${what} is not a JSON object` };
    return { record: withoutMeta(value) };
  } catch (error) {
    return { problem: `this ${what} is not valid JSON (${(error as Error).message})` };
  }
}

/** Splits a top-level JSON array into its elements as the text streams in, tracking strings and depth. */
async function* readJsonArray(file: Readable, path: string): AsyncGenerator<SourceRecord> {
  const decoder = new TextDecoder();
  let depth = 0;
  let inString = false;
  let escaped = false;
  let started = false;
  let element = "";
  let index = 0;
  const finish = function* (): Generator<SourceRecord> {
    const text = element.trim();
    element = "";
    if (text === "") return;
    yield { index, ...objectFrom(text, "element") };
    index++;
  };
  for await (const chunk of file) {
    const text = decoder.decode(chunk as Uint8Array, { stream: true });
    let from = 0;
    for (let i = 0; i < text.length; i++) {
      const char = text[i]!;
      if (!started) {
        if (char === "[") {
          started = true;
          depth = 1;
          from = i + 1;
        } else if (!/\s/.test(char) && char !== "\ufeff") throw new SourceError(`${path} is not a JSON array: it must start with '['`);
        continue;
      }
      if (inString) {
        if (escaped) escaped = false;
        else if (char === "\\") escaped = true;
        else if (char === '"') inString = false;
        continue;
      }
      if (char === '"') inString = true;
      else if (char === "{" || char === "[") depth++;
      else if (char === "}" || char === "]") {
        depth--;
        if (depth === 0) {
          element += text.slice(from, i);
          yield* finish();
          return;
        }
      } else if (char === "," && depth === 1) {
        element += text.slice(from, i);
        from = i + 1;
        yield* finish();
      }
    }
    element += text.slice(from);
  }
  throw new SourceError(`${path} ends before its JSON array is closed`);
}

/** The dotted paths (`geolocation.locationStart`) of the schema's number fields, whose cells become numbers. */
function numberPaths(schema: TSchema, prefix = ""): string[] {
  const properties = (schema as { properties?: Record<string, TSchema> }).properties ?? {};
  return Object.entries(properties).flatMap(([name, property]) => {
    const type = (property as { type?: string }).type;
    if (type === "number" || type === "integer") return [`${prefix}${name}`];
    if (type === "object") return numberPaths(property, `${prefix}${name}.`);
    return [];
  });
}

async function* readCsv(file: Readable, schema: TObject): AsyncGenerator<SourceRecord> {
  const numbers = new Set(numberPaths(schema));
  let headers: string[] | undefined;
  let previousEnd = 0;
  const rows = file.pipe(parse({ info: true, bom: true, relax_column_count: true, skip_empty_lines: true }));
  for await (const { record: cells, info } of rows as AsyncIterable<{ record: string[]; info: { lines: number } }>) {
    const line = previousEnd + 1;
    previousEnd = info.lines;
    if (!headers) {
      headers = cells.map((cell) => cell.trim());
      continue;
    }
    if (cells.length !== headers.length) {
      yield { line, cells, problem: `this row has ${cells.length} cells; the header row has ${headers.length}` };
      continue;
    }
    // Dotted headers become nested fields; empty cells are absent; number columns become numbers.
    const record: Record<string, unknown> = {};
    headers.forEach((header, column) => {
      const cell = cells[column]!;
      if (isMeta(header) || cell === "") return;
      const value = numbers.has(header) && cell.trim() !== "" && Number.isFinite(Number(cell)) ? Number(cell) : cell;
      const parts = header.split(".");
      let target = record;
      for (const part of parts.slice(0, -1)) target = (target[part] ??= {}) as Record<string, unknown>;
      target[parts.at(-1)!] = value;
    });
    yield { line, cells, record };
  }
}

/** The header row of a CSV file (for the rejected file), read on its own. */
export async function csvHeaders(path: string): Promise<string[]> {
  const rows = createReadStream(path).pipe(parse({ bom: true, to_line: 1 }));
  for await (const row of rows as AsyncIterable<string[]>) return row.map((cell) => cell.trim());
  return [];
}
