import { Type } from "@sinclair/typebox";
import type { ResourceDefinition } from "../resources/definition";
import { isMeta, isNote, shown } from "./fields";
import { SourceProblemCode } from "./problems";
import { formats, jsonArrayElements, numberedLines, readSource, type CsvDialect, type Format, type SourceRecord } from "./source";
import { surveyFile, type Survey } from "./survey";
import { SourceError, textOf, type InputFile } from "./text";
import { sourceError } from "./words";

/**
 * The ids of a delete (`importd delete`, DECISIONS 13), read from a file the way an import reads its records, so that
 * the same chunking, journal, rejected file and progress carry them. A file of ids is one of:
 *
 * - text (`.txt`, `.ids`, `.lst`, or a name without an extension): one id per line; blank lines are skipped, a CRLF's
 *   `\r` is not part of the id, nothing else is trimmed (an id with spaces around it is the server's to refuse);
 * - CSV (`.csv`, `.tsv`) with a header row that has an `id` column: a file `importd import` took, or its rejected file;
 *   the other columns are not read;
 * - NDJSON (`.ndjson`, `.jsonl`) of records: each one's `id`;
 * - JSON (`.json`): an array of records (each one's `id`) or of id strings.
 *
 * As with an import, the name decides, or --format when it does not say (or says wrong).
 */

export const idFormats = ["text", ...formats] as const;
export type IdFormat = (typeof idFormats)[number];

const textExtensions = new Set(["", ".txt", ".ids", ".lst"]);

/** The format of a file of ids by its name, or a SourceError that names --format. */
export function idFormatOf(path: string): IdFormat {
  const name = path.slice(path.lastIndexOf("/") + 1);
  const dot = name.lastIndexOf(".");
  const extension = dot > 0 ? name.slice(dot).toLowerCase() : "";
  if (textExtensions.has(extension)) return "text";
  if (extension === ".csv" || extension === ".tsv") return "csv";
  if (extension === ".ndjson" || extension === ".jsonl") return "ndjson";
  if (extension === ".json") return "json";
  throw sourceError({ code: SourceProblemCode.FormatUnknown, path });
}

/** A record of one field, `id`: what a delete reads of each record, and all that is checked of a CSV's header. */
const idRecord = Type.Object({ id: Type.String() });

/** The resource as a file of its ids sees it: the header must have `id`; other columns are not looked at. */
const idsOf = (resource: ResourceDefinition): ResourceDefinition => ({ ...resource, schema: idRecord });

/** The first read, before anything is sent: the text is UTF-8, a CSV has an `id` column, and how many ids there are. */
export async function surveyIds(file: InputFile, format: IdFormat, resource: ResourceDefinition, options: { delimiter?: string } = {}): Promise<Survey> {
  if (format !== "text") {
    const { records, csv } = await surveyFile(file, format, idsOf(resource), options).catch((error: unknown) => {
      // Said for what a delete reads: the id column alone, whatever the resource's other fields.
      if (error instanceof SourceError && error.problem?.code === SourceProblemCode.NotAHeader) {
        throw new SourceError(`${file.name} line 1 has no id column (${shown(error.problem.header)}): importd delete reads a CSV file's ids from its column named id. A file of one id per line is text: name it .txt, or pass --format text.`, error.problem);
      }
      throw error;
    });
    // Columns (fields) besides id are a record's other data, not mistakes: not reported.
    return { records, csv, unknown: [] };
  }
  let records = 0;
  for await (const { content } of numberedLines(textOf(file))) if (content.trim() !== "") records++;
  return { records, unknown: [] };
}

/** The ids, each as a record `{ id }` with where it stood, or what is wrong with it; read as the survey checked the file. */
export async function* readIds(file: InputFile, format: IdFormat, resource: ResourceDefinition, csv?: CsvDialect, onBytes?: (bytes: number) => void): AsyncGenerator<SourceRecord> {
  if (format === "text") yield* readTextIds(textOf(file, onBytes));
  else if (format === "json") yield* readJsonIds(textOf(file, onBytes), file.name);
  else for await (const source of readSource(file, format as Format, idsOf(resource).schema, csv, onBytes)) yield idOfRecord(source, format === "csv" ? "row" : "line");
}

/** A record's id alone; one without an id cannot be deleted, and is rejected before sending. */
function idOfRecord(source: SourceRecord, what: string): SourceRecord {
  if (!source.record) return source;
  const { record, ...where } = source;
  // A number or other non-string is sent as it is: the server's answer says what an id must be.
  if (record.id === undefined || record.id === "") return { ...where, problem: `this ${what} has no id` };
  return { ...where, record: { id: record.id } };
}

async function* readTextIds(text: AsyncIterable<string>): AsyncGenerator<SourceRecord> {
  // `cells`: the rejected file of a text file is a CSV of one column, id (see run.ts).
  for await (const { line, content } of numberedLines(text)) if (content.trim() !== "") yield { line, record: { id: content }, cells: [content] };
}

async function* readJsonIds(text: AsyncIterable<string>, path: string): AsyncGenerator<SourceRecord> {
  for await (const { index, content } of jsonArrayElements(text, path)) {
    const where = { index };
    let value: unknown;
    try {
      value = JSON.parse(content);
    } catch (error) {
      yield { ...where, problem: `this element is not valid JSON (${(error as Error).message})`, raw: content };
      continue;
    }
    if (typeof value === "string") yield { ...where, record: { id: value } };
    else if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      // A rejected file's note (`_` fields alone) before an element it gives back as it was.
      if (isNote(value)) continue;
      const record = Object.fromEntries(Object.entries(value).filter(([name]) => !isMeta(name)));
      yield idOfRecord({ ...where, record }, "element");
    } else yield { ...where, problem: "this element is neither an id (a string) nor a record", raw: content };
  }
}

/** How the rejected file of a text file of ids is written: a CSV of one column, which `importd delete` reads again. */
export const idCsvDialect: CsvDialect = { delimiter: ",", lineEnding: "\n", headers: ["id"], bom: false, quoted: false };
