import { delimiterName, delimiters } from "./csv-dialect";
import { shown } from "./fields";
import { SourceError, SourceProblemCode, type SourceProblem } from "./problems";

/**
 * The importer's words for the problems that a choice of the surface remedies (problems.ts): the CLI's, naming its
 * flags. They are the error's message, which the CLI prints as it is. The console has its own words for the remedies
 * (console/import/words.ts) and shares with these what the longer problems are.
 */

/** The problem as a SourceError, its message in the CLI's words. */
export const sourceError = (problem: SourceProblem) => new SourceError(inCliWords(problem), problem);

export function inCliWords(problem: SourceProblem): string {
  switch (problem.code) {
    case SourceProblemCode.FirstLineTooLong:
      return `${problem.path} line 1 is longer than 1 MB: is this a CSV file? Pass --format if it is another kind.`;
    case SourceProblemCode.DelimiterTied:
      return `${delimitersTied(problem)} Pass --delimiter (',', ';' or tab).`;
    case SourceProblemCode.DelimiterWrong: {
      const { path, resource, delimiter, better } = problem;
      return `${path} line 1 names no field of ${resource} when read with ${delimiterName(delimiter)}, but it does with ${delimiterName(better)}: pass --delimiter ${better === "\t" ? "tab" : `'${better}'`}, or leave --delimiter out.`;
    }
    case SourceProblemCode.NotAHeader:
      return `${notAHeader(problem)} If line 1 is data, add a header row; if the file holds other records, choose another --resource.`;
    case SourceProblemCode.UnknownFields: {
      const them = problem.unknown.length === 1 ? "it" : "them";
      return `${unknownFields(problem)}\nRename ${them} in the file, or pass --ignore-unknown-columns to import the file without ${them}. Nothing was sent.`;
    }
    case SourceProblemCode.FormatUnknown:
      return `cannot tell the format of '${problem.path}' from its name: name it .csv, .tsv, .ndjson (or .jsonl) or .json, or pass --format csv, ndjson or json`;
    case SourceProblemCode.NotAJsonArray:
      return `${problem.path} is not a JSON array: it must start with '[' (a file of one JSON object per line is NDJSON: name it .ndjson, or pass --format ndjson)`;
  }
}

// What the longer problems are, said the same on every surface; the remedy after it is each surface's own.

type Of<C extends SourceProblemCode> = Extract<SourceProblem, { code: C }>;

export const delimitersTied = ({ path, tied }: Of<"delimiter-tied">) =>
  `cannot tell whether ${path} is delimited by ${tied.map(delimiterName).join(" or ")}: its header reads as well with each.`;

export const notAHeader = ({ path, resource, header, delimiter, fields }: Of<"not-a-header">) =>
  `${path} line 1 is not a header row of ${resource}: none of its cells names a field ` +
  `(read ${delimiter ? `with ${delimiterName(delimiter)}` : `with ${delimiters.map(delimiterName).join(", ")}`}: ${shown(header)}). ` +
  `importd needs a first row that names the columns: ${fields.join(", ")}.`;

/** Which fields, and where each is, with the field it may mean: a line each (the first 20). */
export function unknownFields({ path, resource, kind, unknown }: Of<"unknown-fields">): string {
  const lines = unknown.slice(0, 20).map(
    ({ name, where, count, suggestion }) =>
      `  ${shown(name)} (${where}${count !== undefined && count > 1 ? ` and ${count - 1} more record${count === 2 ? "" : "s"}` : ""})${suggestion ? `: did you mean ${suggestion}?` : ""}`,
  );
  if (unknown.length > 20) lines.push(`  and ${unknown.length - 20} more`);
  return `${path}: ${unknown.length === 1 ? `1 ${kind} is` : `${unknown.length} ${kind}s are`} not ${unknown.length === 1 ? "a field" : "fields"} of ${resource}, and would not be imported:\n${lines.join("\n")}`;
}
