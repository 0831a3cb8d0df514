import { closeSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { parseArgs } from "node:util";
import { createClient, ImportdConnectionError, ImportdProblem, type Resource } from "../client";
import { duration } from "../importer/progress";
import { resources } from "../resources/registry";
import { UsageError, type Output } from "./errors";
import { resourceOf } from "./import-command";
import { connectionFlags, connectionUsage, keyRefused, serverConnection } from "./server-connection";

export const exportUsage = `importd export --resource <resource> --base-url <url> [--api-key <key>] [--ca-file <file>] [--format csv|ndjson]
              [-o <file>] [--updated-since <time>]

  Writes every record of the resource, in the order of their ids, from one snapshot of the environment: what
  was there when the export began, nothing that jobs write while it runs. NDJSON (one record a line, with
  updatedAt and lastJobId) or CSV in the layout importd import reads (a column per field, dotted for nested
  ones such as geolocation.locationStart, then updatedAt and lastJobId). Either file imported again with
  importd import leaves every record unchanged. Written to <file> under a temporary name, renamed once whole:
  an export cut short leaves nothing at <file>. Progress on stderr at a terminal.

  --resource <resource>   ${resources.map((resource) => resource.path).join(", ")}
${connectionUsage}
  --format <format>       csv or ndjson (default: by the name of -o, .csv or .tsv for csv; ndjson otherwise)
  -o, --output <file>     where to write it (default: stdout)
  --updated-since <time>  only the records written at or after this time: an ISO 8601 timestamp with its time
                          zone, such as 2026-11-27T10:00:00Z (or a date, 2026-11-27, for its start in UTC)

  Exit code: 0 written whole, 2 a usage, file or connection problem (nothing left at <file>), 130 interrupted.`;

const formats = ["csv", "ndjson"] as const;
type ExportFormat = (typeof formats)[number];

/** How many records a stream of the export's bytes holds: NDJSON lines, or CSV rows (a quoted cell may hold line ends). */
class RecordCounter {
  records = 0;
  private inQuotes = false;

  constructor(private readonly csv: boolean) {
    // The header row is not a record.
    if (csv) this.records = -1;
  }

  add(bytes: Uint8Array): void {
    if (!this.csv) {
      for (let at = bytes.indexOf(0x0a); at !== -1; at = bytes.indexOf(0x0a, at + 1)) this.records++;
      return;
    }
    for (let at = 0; at < bytes.length; at++) {
      const byte = bytes[at]!;
      if (byte === 0x22) this.inQuotes = !this.inQuotes;
      else if (byte === 0x0a && !this.inQuotes) this.records++;
    }
  }
}

/** `importd export`: the records of a resource to a file (or stdout), with progress at a terminal; exit 0 or 2. */
export async function exportCommand(argv: string[], env: Record<string, string | undefined>, io: Output, interactive: boolean): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      resource: { type: "string" },
      ...connectionFlags,
      format: { type: "string" },
      output: { type: "string", short: "o" },
      "updated-since": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) return io.out(exportUsage), 0;
  if (positionals.length > 0) throw new UsageError(`export takes no file to read, got '${positionals.join(" ")}' (write to a file with -o <file>)`);
  const resource = resourceOf(values.resource);
  if (values.format !== undefined && !formats.includes(values.format as ExportFormat)) throw new UsageError(`--format must be one of ${formats.join(", ")}, not '${values.format}'`);
  const file = values.output;
  const format: ExportFormat = (values.format as ExportFormat | undefined) ?? (file && /\.(csv|tsv)$/i.test(file) ? "csv" : "ndjson");
  const connection = serverConnection(values, env);
  const client = createClient(connection);

  const partial = file === undefined ? undefined : `${file}.importd-partial`;
  let descriptor: number | undefined;
  const started = performance.now();
  let drawn = false;
  try {
    const response = await client.exportRecords(resource.path as Resource, { format, updatedSince: values["updated-since"] });
    if (partial) {
      descriptor = openSync(partial, "w", 0o600);
      // Interrupted (Ctrl-C: main exits 130), nothing is left behind either.
      process.once("exit", () => rmSync(partial, { force: true }));
    }
    const counter = new RecordCounter(format === "csv");
    let bytes = 0;
    let lastDrawn = 0;
    const draw = () => {
      const seconds = (performance.now() - started) / 1000;
      process.stderr.write(`\r\x1b[2K${counter.records.toLocaleString("en-US")} ${resource.path} records, ${(bytes / 1e6).toFixed(1)} MB, ${Math.round(counter.records / Math.max(seconds, 0.001)).toLocaleString("en-US")}/s`);
      drawn = true;
    };
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      counter.add(chunk);
      bytes += chunk.byteLength;
      if (descriptor !== undefined) writeSync(descriptor, chunk);
      else await Bun.write(Bun.stdout, chunk);
      if (interactive && performance.now() - lastDrawn > 200) {
        lastDrawn = performance.now();
        draw();
      }
    }
    if (descriptor !== undefined) {
      closeSync(descriptor);
      descriptor = undefined;
      renameSync(partial!, file!);
    }
    if (drawn) process.stderr.write("\n");
    const records = Math.max(0, counter.records);
    io.err(`${file ?? "stdout"}: ${records} ${resource.path} record${records === 1 ? "" : "s"} (${format}, ${(bytes / 1e6).toFixed(1)} MB) in ${duration((performance.now() - started) / 1000)}.`);
    return 0;
  } catch (error) {
    if (drawn) process.stderr.write("\n");
    if (descriptor !== undefined) closeSync(descriptor);
    if (partial) rmSync(partial, { force: true });
    if (error instanceof ImportdProblem && error.status === 401) return io.err(`importd: ${keyRefused(connection.baseUrl)}`), 2;
    if (error instanceof ImportdProblem && error.status === 400) return io.err(`importd: ${Object.values(error.errors ?? {}).flat().join(" ") || error.message}`), 2;
    if (error instanceof ImportdProblem || error instanceof ImportdConnectionError) return io.err(`importd: the export did not start: ${error.message}`), 2;
    const code = (error as { code?: string }).code;
    if (code === "ENOENT" || code === "EACCES" || code === "EISDIR") return io.err(`importd: cannot write ${file}: ${(error as Error).message}`), 2;
    return io.err(`importd: the export was cut short (${(error as Error).message}); nothing was left at ${file ?? "stdout's end"}. Run the same command again.`), 2;
  }
}
