import { parseArgs } from "node:util";
import { ImportdConnectionError, ImportdProblem } from "../client";
import { parseDelimiter } from "../importer/csv-dialect";
import { defaultChunkBytes } from "../importer/chunked-import";
import type { MirrorLimits } from "../importer/mirror";
import { runImport, type ImportRun } from "../importer/run";
import { formats, SourceError, type Format } from "../importer/source";
import { resourceByPath, resources } from "../resources/registry";
import type { ResourceDefinition } from "../resources/definition";
import { UsageError, type Output } from "./errors";
import { connectionFlags, connectionUsage, keyRefused, serverConnection } from "./server-connection";

export const importUsage = `importd import <file> --resource <resource> --base-url <url> [--api-key <key>] [--ca-file <file>] [--validate-only | --dry-run] [--restart]
              [--mirror [--max-delete-percent <n> | --max-delete <n>]]

  Imports a JSON array (.json), NDJSON (.ndjson, .jsonl) or CSV file with a header row (.csv, .tsv; dotted
  headers such as geolocation.locationStart are nested fields, empty cells are absent), streaming it in
  requests under 8 MB, in order, waiting for each job. Records that are not applied go to
  <file>.rejected.<ext>, each with _error and _line (or _index); fix them and run the command on that file.
  A rejected file you changed is never replaced: the next one gets another name (<file>.rejected-2.<ext>).

  First the whole file is read once and checked, and nothing is sent if it is not what it seems: not UTF-8
  text, a CSV whose delimiter cannot be told or whose line endings are mixed, a quote out of place, a header
  without a required column, or columns (fields) the resource does not define, each named with the line and
  the field it may have meant. The same id twice in the file: the later record wins (it is sent after the
  earlier one, never in the same request).

  While it runs, <file>.importd-progress records which requests went through. Interrupted (Ctrl-C, a crash,
  the server lost)? Run the same command again: it resumes where it stopped and applies no request twice.
  A finished import removes that file, so running the command again imports the whole file again (after
  you added missing reference data, say).

  --resource <resource>   ${resources.map((resource) => resource.path).join(", ")}
${connectionUsage}
  --format <format>       csv, ndjson or json, when the file's name does not say which (default: by its name)
  --delimiter <char>      a CSV's delimiter: ',', ';', '|' or tab (default: found from the header row)
  --ignore-unknown-columns
                          import a file with columns (or fields) the resource does not define: they are left out
  --validate-only         check the whole file against the same rules as the server, print every problem, send
                          nothing (whether referenced records exist is checked only when the job runs)
  --dry-run               send the file as dry runs: importd checks it against the environment's data (references
                          included) and says what importing would create, update or leave unchanged, and writes
                          the records it would reject to <file>.rejected.<ext>; nothing is applied
  --mirror                mirror the file: also delete the records of the resource that the file does not have.
                          The file is sent in a sync (POST /v2/syncs), which is then completed: a job, in order after
                          the file's, that deletes every record of the resource no job of the sync sent and no other job
                          wrote since it opened (one that other records refer to stays, rejected). It prints what it
                          deleted. Guarded: if it would delete more than 10% of the resource's records, it deletes
                          nothing, says how many would go, and exits 1; the sync stays open, and the same command with a
                          higher limit completes it without sending the file again. A record refused before any job took
                          it (unreadable, or invalid) stops the mirror before it deletes anything: importd would not know
                          the file has it. Interrupted, the same command resumes in the same sync (open for 24 hours).
                          With --dry-run: nothing is applied; the file goes as dry runs in a sync of its own, whose
                          dry-run completion says exactly what would be deleted, and whether the limit would stop it
  --max-delete-percent <n>
                          with --mirror: the share of the resource's records it may delete, 0 to 100 (default 10)
  --max-delete <n>        with --mirror: how many records it may delete (instead of a share)
  --restart               do not resume an interrupted import of this file: send everything again
  --chunk-bytes <n>       largest request body in bytes (default ${defaultChunkBytes})

  Exit code: 0 every record applied (or valid), 1 some rejected (or a mirror that did not delete: stopped by its
  limit, or some of its records still referred to), 2 a usage, file or connection problem,
  130 interrupted (Ctrl-C).`;

/** `importd import`: its own flags, and exit codes 0 (all applied), 1 (some rejected) or 2. */
export async function importCommand(argv: string[], env: Record<string, string | undefined>, io: Output, interactive: boolean): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      resource: { type: "string" },
      ...connectionFlags,
      format: { type: "string" },
      delimiter: { type: "string" },
      "ignore-unknown-columns": { type: "boolean" },
      "validate-only": { type: "boolean" },
      "dry-run": { type: "boolean" },
      restart: { type: "boolean" },
      mirror: { type: "boolean" },
      "max-delete-percent": { type: "string" },
      "max-delete": { type: "string" },
      "chunk-bytes": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) return io.out(importUsage), 0;
  if (positionals.length !== 1) throw new UsageError(`import takes one file, got ${positionals.length === 0 ? "none" : `'${positionals.join(" ")}'`}`);
  const resource = resourceOf(values.resource);
  const validateOnly = values["validate-only"] ?? false;
  if (validateOnly && values["dry-run"]) throw new UsageError("--validate-only and --dry-run do not go together: --validate-only checks the file here and sends nothing, --dry-run has importd check it against the environment's data");
  if (values.format !== undefined && !formats.includes(values.format as Format)) throw new UsageError(`--format must be one of ${formats.join(", ")}, not '${values.format}'`);
  const format = values.format as Format | undefined;
  const delimiter = delimiterOf(values.delimiter);
  const mirror = values.mirror ? mirrorLimitsOf(values["max-delete-percent"], values["max-delete"]) : undefined;
  if (!mirror && (values["max-delete-percent"] !== undefined || values["max-delete"] !== undefined)) throw new UsageError("--max-delete-percent and --max-delete go with --mirror: they limit what the mirror deletes");
  if (mirror && validateOnly) throw new UsageError("--mirror and --validate-only do not go together: --validate-only sends nothing, a mirror needs importd's records (use --mirror --dry-run to see what it would delete)");
  // --validate-only checks the file here: it needs no server.
  const connection = validateOnly ? { baseUrl: "", apiKey: "" } : serverConnection(values, env);
  const chunkBytes = chunkBytesOf(values["chunk-bytes"]);

  return runFile(
    {
      file: positionals[0]!,
      resource,
      ...connection,
      format,
      delimiter: delimiter ?? (/\.tsv$/i.test(positionals[0]!) ? "\t" : undefined),
      ignoreUnknownColumns: values["ignore-unknown-columns"] ?? false,
      validateOnly,
      dryRun: values["dry-run"] ?? false,
      restart: values.restart ?? false,
      chunkBytes,
      mirror,
    },
    "import",
    io,
    interactive,
  );
}

/** --max-delete-percent (0 to 100) or --max-delete (a count), not both; neither: importd's default share. */
function mirrorLimitsOf(percent: string | undefined, count: string | undefined): MirrorLimits {
  if (percent !== undefined && count !== undefined) throw new UsageError("give --max-delete-percent or --max-delete, not both: one limit says how much the mirror may delete");
  const whole = /^(0|[1-9][0-9]{0,8})$/;
  if (percent !== undefined) {
    if (!whole.test(percent) || Number(percent) > 100) throw new UsageError(`--max-delete-percent must be a whole number from 0 to 100, not '${percent}'`);
    return { maxDeletePercent: Number(percent) };
  }
  if (count !== undefined) {
    if (!whole.test(count)) throw new UsageError(`--max-delete must be a whole number from 0, not '${count}'`);
    return { maxDelete: Number(count) };
  }
  return {};
}

/** --resource, checked: one of importd's resources. */
export function resourceOf(text: string | undefined): ResourceDefinition {
  const resource = resourceByPath(text ?? "");
  if (!resource) throw new UsageError(`--resource must be one of ${resources.map((r) => r.path).join(", ")}${text ? `, not '${text}'` : ""}`);
  return resource;
}

/** --delimiter, checked; undefined when not given. */
export function delimiterOf(text: string | undefined): string | undefined {
  try {
    return text === undefined ? undefined : parseDelimiter(text);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** --chunk-bytes, checked. */
export function chunkBytesOf(text: string | undefined): number {
  const chunkBytes = text === undefined ? defaultChunkBytes : Number(text);
  if (!Number.isSafeInteger(chunkBytes) || chunkBytes < 1024) throw new UsageError(`--chunk-bytes must be a whole number of at least 1024, not '${text}'`);
  return chunkBytes;
}

/**
 * Runs an import or a delete of a file (importer/run.ts) at the terminal: its progress on stderr (one line redrawn on
 * a terminal), its summary on stdout, and what stops it said in one line, exit code 2. `what` names the request the
 * server refused.
 */
export async function runFile(run: Omit<ImportRun, "interactive" | "columns" | "out" | "note" | "progress">, what: "import" | "deletion", io: Output, interactive: boolean): Promise<number> {
  let drawn = false;
  const endLine = () => {
    if (drawn) process.stderr.write("\n");
    drawn = false;
  };
  try {
    const code = await runImport({
      ...run,
      interactive,
      columns: () => process.stderr.columns || 80,
      out: (line) => {
        endLine();
        io.out(line);
      },
      note: (line) => {
        endLine();
        io.err(line);
      },
      progress: (text) => {
        if (interactive) {
          process.stderr.write(`\r\x1b[2K${text}`);
          drawn = true;
        } else io.err(text);
      },
    });
    endLine();
    return code;
  } catch (error) {
    endLine();
    if (error instanceof SourceError || error instanceof ImportdConnectionError) return io.err(`importd: ${error.message}`), 2;
    if (error instanceof ImportdProblem && error.status === 401) return io.err(`importd: ${keyRefused(run.baseUrl)}`), 2;
    if (error instanceof ImportdProblem) return io.err(`importd: the server refused the ${what}: ${error.message}`), 2;
    const code = (error as { code?: string }).code;
    if (code === "ENOENT") return io.err(`importd: no such file: ${run.file}`), 2;
    if (code === "EACCES" || code === "EISDIR") return io.err(`importd: cannot read ${run.file}: ${code === "EACCES" ? "permission denied" : "it is a directory"}`), 2;
    throw error;
  }
}
