/**
 * What can be wrong with a file whose remedy is a choice the user makes where they import: its format, its CSV
 * delimiter, the resource, whether to leave out unknown columns. The CLI makes those choices with flags, the console
 * with controls on its page, so each surface words these problems its own way, from the code and the values the
 * error carries: the CLI in importer/words.ts (the error's message), the console in console/import/words.ts.
 */

export const SourceProblemCode = {
  /** A CSV file's first line is over the survey's limit: not a CSV file, perhaps. */
  FirstLineTooLong: "first-line-too-long",
  /** The header reads as well with two delimiters or more. */
  DelimiterTied: "delimiter-tied",
  /** The header names no field with the delimiter given, but does with another. */
  DelimiterWrong: "delimiter-wrong",
  /** No cell of the first line names a field: data, or another resource's records. */
  NotAHeader: "not-a-header",
  /** Columns (or fields) the resource does not define, which the server would drop without a word. */
  UnknownFields: "unknown-fields",
  /** The file's name does not say its format. */
  FormatUnknown: "format-unknown",
  /** A .json file that is not an array, such as NDJSON under a .json name. */
  NotAJsonArray: "not-a-json-array",
} as const;
export type SourceProblemCode = (typeof SourceProblemCode)[keyof typeof SourceProblemCode];

/** A field the resource does not define: its name, where it is, how many records have it (JSON), the field it may mean. */
export type UnknownField = { name: string; where: string; count?: number; suggestion?: string };

/** A problem's code and values. `path` is the file's name as the user gave it; `resource`, the resource's path. */
export type SourceProblem =
  | { code: typeof SourceProblemCode.FirstLineTooLong; path: string }
  | { code: typeof SourceProblemCode.DelimiterTied; path: string; tied: string[] }
  | { code: typeof SourceProblemCode.DelimiterWrong; path: string; resource: string; delimiter: string; better: string }
  /** `delimiter`: the one the header was read with, if one was given; otherwise it was read with each. */
  | { code: typeof SourceProblemCode.NotAHeader; path: string; resource: string; header: string; delimiter?: string; fields: string[] }
  | { code: typeof SourceProblemCode.UnknownFields; path: string; resource: string; kind: "column" | "field"; unknown: UnknownField[] }
  | { code: typeof SourceProblemCode.FormatUnknown; path: string }
  | { code: typeof SourceProblemCode.NotAJsonArray; path: string };

/**
 * Something about the file that stops the import before it sends anything more; said in one line, exit 2. `problem`,
 * when the remedy is a choice of the surface (above): its code and values, for the console to word its own way.
 */
export class SourceError extends Error {
  constructor(
    message: string,
    readonly problem?: SourceProblem,
  ) {
    super(message);
  }
}
