import { SourceProblemCode, type SourceError } from "../../importer/problems";
import { delimiterName } from "../../importer/csv-dialect";
import { delimitersTied, notAHeader, unknownFields } from "../../importer/words";

/**
 * A file's problem in the console's words: where the CLI names its flags (importer/words.ts), the console names the
 * controls of its page. A problem that no choice remedies is said as the importer says it.
 */
export function inConsoleWords(error: SourceError): string {
  const problem = error.problem;
  if (!problem) return error.message;
  switch (problem.code) {
    case SourceProblemCode.FirstLineTooLong:
      return `${problem.path} line 1 is longer than 1 MB: is this a CSV file? Choose the format if it is another kind.`;
    case SourceProblemCode.DelimiterTied:
      return `${delimitersTied(problem)} Choose the delimiter.`;
    case SourceProblemCode.DelimiterWrong: {
      const { path, resource, delimiter, better } = problem;
      return `${path} line 1 names no field of ${resource} when read with ${delimiterName(delimiter)}, but it does with ${delimiterName(better)}: choose ${delimiterName(better)} as the delimiter, or choose "Detect" as the delimiter.`;
    }
    case SourceProblemCode.NotAHeader:
      return `${notAHeader(problem)} If line 1 is data, add a header row; if the file holds other records, choose another resource.`;
    case SourceProblemCode.UnknownFields: {
      const them = problem.unknown.length === 1 ? "it" : "them";
      return `${unknownFields(problem)}\nRename ${them} in the file, or tick "Ignore unknown columns" to import the file without ${them}. Nothing was sent.`;
    }
    case SourceProblemCode.FormatUnknown:
      return `cannot tell the format of '${problem.path}' from its name: name it .csv, .tsv, .ndjson (or .jsonl) or .json, or choose the format`;
    case SourceProblemCode.NotAJsonArray:
      return `${problem.path} is not a JSON array: it must start with '[' (a file of one JSON object per line is NDJSON: name it .ndjson, or choose NDJSON as the format)`;
  }
}
