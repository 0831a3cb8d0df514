import { parseArgs } from "node:util";
import { JobOperation } from "../domain/job";
import { defaultChunkBytes } from "../importer/chunked-import";
import { idFormats, type IdFormat } from "../importer/id-source";
import { resources } from "../resources/registry";
import { UsageError, type Output } from "./errors";
import { chunkBytesOf, delimiterOf, resourceOf, runFile } from "./import-command";
import { connectionFlags, connectionUsage, serverConnection } from "./server-connection";

export const deleteUsage = `importd delete <file> --resource <resource> --base-url <url> [--api-key <key>] [--ca-file <file>] [--dry-run] [--restart]

  Deletes the records whose ids the file names, sending them as delete jobs in requests under 8 MB, in order,
  waiting for each job; each takes its place in the environment's one order, with the imports.
  What the file is goes by its name, as for importd import (--format when it does not say, or says wrong):
    .txt, .ids, .lst, or no extension   text: one id per line; blank lines are skipped and a line's CR (of a
                                        CRLF) is not part of the id; nothing else is trimmed
    .csv, .tsv                          CSV with a header row that has an id column: a file importd import took,
                                        or a rejected file; only the id column is read
    .ndjson, .jsonl                     one record per line: each one's id
    .json                               a JSON array of records (each one's id) or of ids ("A-1")

  A record that exists is deleted; an id that names no record is not found, which is not an error (deleting
  twice is harmless); a record that another record still refers to (a sub area that assets name) is rejected
  and stays: nothing cascades. The summary counts deleted, not found and rejected, and names the first rejected
  ids with why; all of them go to <file>.rejected.<ext> (a text file's to <file>.rejected.csv: id, _error,
  _line), on which the same command runs once their reason is dealt with.

  While it runs, <file>.importd-progress records which requests went through. Interrupted (Ctrl-C, a crash,
  the server lost)? Run the same command again: it resumes where it stopped and sends no request twice.

  --resource <resource>   ${resources.map((resource) => resource.path).join(", ")}
${connectionUsage}
  --format <format>       ${idFormats.join(", ")}, when the file's name does not say which (default: by its name)
  --delimiter <char>      a CSV's delimiter: ',', ';', '|' or tab (default: found from the header row)
  --dry-run               send the ids as dry runs: importd says what would be deleted, not found or rejected,
                          and writes the ids it would reject to the rejected file; nothing is deleted
  --restart               do not resume an interrupted delete of this file: send everything again
  --chunk-bytes <n>       largest request body in bytes (default ${defaultChunkBytes})

  Exit code: 0 every id deleted or not found, 1 some rejected, 2 a usage, file or connection problem,
  130 interrupted (Ctrl-C).`;

/** `importd delete`: exit codes as importd import's, 0 (all deleted or not found), 1 (some rejected) or 2. */
export async function deleteCommand(argv: string[], env: Record<string, string | undefined>, io: Output, interactive: boolean): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      resource: { type: "string" },
      ...connectionFlags,
      format: { type: "string" },
      delimiter: { type: "string" },
      "dry-run": { type: "boolean" },
      restart: { type: "boolean" },
      "chunk-bytes": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) return io.out(deleteUsage), 0;
  if (positionals.length !== 1) throw new UsageError(`delete takes one file of ids, got ${positionals.length === 0 ? "none" : `'${positionals.join(" ")}'`}`);
  const resource = resourceOf(values.resource);
  if (values.format !== undefined && !idFormats.includes(values.format as IdFormat)) throw new UsageError(`--format must be one of ${idFormats.join(", ")}, not '${values.format}'`);
  const delimiter = delimiterOf(values.delimiter);
  const file = positionals[0]!;
  return runFile(
    {
      file,
      resource,
      operation: JobOperation.Delete,
      ...serverConnection(values, env),
      format: values.format as IdFormat | undefined,
      delimiter: delimiter ?? (/\.tsv$/i.test(file) ? "\t" : undefined),
      validateOnly: false,
      dryRun: values["dry-run"] ?? false,
      restart: values.restart ?? false,
      chunkBytes: chunkBytesOf(values["chunk-bytes"]),
    },
    "deletion",
    io,
    interactive,
  );
}
