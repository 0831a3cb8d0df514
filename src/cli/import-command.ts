import { parseArgs } from "node:util";
import { ImportdConnectionError, ImportdProblem } from "../client";
import { defaultChunkBytes, runImport } from "../importer/run";
import { SourceError } from "../importer/source";
import { resourceByPath, resources } from "../resources/registry";
import { UsageError, type Output } from "./errors";
import { connectionFlags, connectionUsage, serverConnection } from "./server-connection";

export const importUsage = `importd import <file> --resource <resource> --base-url <url> [--api-key <key>] [--ca-file <file>] [--validate-only | --dry-run] [--restart]

  Imports a JSON array (.json), NDJSON (.ndjson, .jsonl) or CSV file with a header row (.csv; dotted
  headers such as geolocation.locationStart are nested fields, empty cells are absent), streaming it in
  requests under 8 MB, in order, waiting for each job. Records that are not applied go to
  <file>.rejected.<ext>, each with _error and _line (or _index); fix them and run the command on that file.

  While it runs, <file>.importd-progress records which requests went through. Interrupted (Ctrl-C, a crash,
  the server lost)? Run the same command again: it resumes where it stopped and applies no request twice.
  A finished import removes that file, so running the command again imports the whole file again (after
  you added missing reference data, say).

  --resource <resource>   ${resources.map((resource) => resource.path).join(", ")}
${connectionUsage}
  --validate-only         check the whole file against the same rules as the server, print every problem, send
                          nothing (whether referenced records exist is checked only when the job runs)
  --dry-run               send the file as dry runs: importd checks it against the environment's data (references
                          included) and says what importing would create, update or leave unchanged, and writes
                          the records it would reject to <file>.rejected.<ext>; nothing is applied
  --restart               do not resume an interrupted import of this file: send everything again
  --chunk-bytes <n>       largest request body in bytes (default ${defaultChunkBytes})

  Exit code: 0 every record applied (or valid), 1 some rejected, 2 usage or connection errors.`;

/** `importd import`: its own flags, and exit codes 0 (all applied), 1 (some rejected) or 2. */
export async function importCommand(argv: string[], env: Record<string, string | undefined>, io: Output, interactive: boolean): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      resource: { type: "string" },
      ...connectionFlags,
      "validate-only": { type: "boolean" },
      "dry-run": { type: "boolean" },
      restart: { type: "boolean" },
      "chunk-bytes": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) return io.out(importUsage), 0;
  if (positionals.length !== 1) throw new UsageError(`import takes one file, got ${positionals.length === 0 ? "none" : `'${positionals.join(" ")}'`}`);
  const resource = resourceByPath(values.resource ?? "");
  if (!resource) throw new UsageError(`--resource must be one of ${resources.map((r) => r.path).join(", ")}${values.resource ? `, not '${values.resource}'` : ""}`);
  const validateOnly = values["validate-only"] ?? false;
  if (validateOnly && values["dry-run"]) throw new UsageError("--validate-only and --dry-run do not go together: --validate-only checks the file here and sends nothing, --dry-run has importd check it against the environment's data");
  // --validate-only checks the file here: it needs no server.
  const connection = validateOnly ? { baseUrl: "", apiKey: "" } : serverConnection(values, env);
  const chunkBytes = values["chunk-bytes"] === undefined ? defaultChunkBytes : Number(values["chunk-bytes"]);
  if (!Number.isSafeInteger(chunkBytes) || chunkBytes < 1024) throw new UsageError(`--chunk-bytes must be a whole number of at least 1024, not '${values["chunk-bytes"]}'`);

  let drawn = false;
  try {
    const code = await runImport({
      file: positionals[0]!,
      resource,
      ...connection,
      validateOnly,
      dryRun: values["dry-run"] ?? false,
      restart: values.restart ?? false,
      chunkBytes,
      interactive,
      columns: () => process.stderr.columns || 80,
      out: (line) => {
        if (drawn) process.stderr.write("\n");
        drawn = false;
        io.out(line);
      },
      note: (line) => {
        if (drawn) process.stderr.write("\n");
        drawn = false;
        io.err(line);
      },
      progress: (text) => {
        if (interactive) {
          process.stderr.write(`\r\x1b[2K${text}`);
          drawn = true;
        } else io.err(text);
      },
    });
    if (drawn) process.stderr.write("\n");
    return code;
  } catch (error) {
    if (drawn) process.stderr.write("\n");
    if (error instanceof SourceError || error instanceof ImportdConnectionError) return io.err(`importd: ${error.message}`), 2;
    if (error instanceof ImportdProblem) return io.err(`importd: the server refused the import: ${error.message}`), 2;
    if ((error as { code?: string }).code === "ENOENT") return io.err(`importd: no such file: ${positionals[0]}`), 2;
    throw error;
  }
}
