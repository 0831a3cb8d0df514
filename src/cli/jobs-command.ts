import { parseArgs } from "node:util";
import { createClient, ImportdConnectionError, ImportdProblem, type ImportdClient, type JobDocument, type RejectedRecord } from "../client";
import { isTerminal, jobOperations, jobStatuses, operationMeanings } from "../domain/job";
import { UsageError, type Output } from "./errors";
import { RejectedColumns } from "../importer/rejected-csv";
import { jobSummary, jobTable, rejectedJson } from "./job-views";
import { connectionFlags, connectionUsage, keyRefused, serverConnection } from "./server-connection";

const defaultListLimit = 20;
const maxListLimit = 1000;

/** The help; `jobTypes` from the resource registry, which only --help loads (it would double the time of a plain `jobs list`). */
export const jobsUsage = (jobTypes: readonly string[]) => `importd jobs: the jobs of an environment, on a running server, through its API

  importd jobs list [--status <status>] [--type <type>] [--operation <op>] [--dry-run | --no-dry-run]
                    [--limit <n> | --all] [--json]
  importd jobs show <id> [--wait] [--json]
  importd jobs rejected <id> [--format csv|json]
  importd jobs cancel <id>
  each with --base-url <url> [--api-key <key>] [--ca-file <file>]

jobs list           the environment's jobs, newest first, as a table: id, type, status, records, applied, rejected,
                    when created (UTC); when a delete job is listed, an OP column after the type says what each job
                    does (--operation below). The newest ${defaultListLimit} unless --limit or --all says otherwise;
                    when there are more, stderr says so.
  --status <status>   only jobs in this state: ${jobStatuses.join(", ")}
  --type <type>       only jobs of this type: ${jobTypes.join(", ")}
  --operation <op>    only jobs that do this: ${jobOperations.map((operation) => `${operation} (${operationMeanings[operation].replace(/,.*/, "")})`).join(",\n                      ")}
  --dry-run           only dry runs (marked * in the table); --no-dry-run: only real imports
  --limit <n>         the newest <n> jobs, 1 to ${maxListLimit} (default ${defaultListLimit})
  --all               every job, page after page (instead of --limit)
  --json              one job document per line (NDJSON), as GET /v2/status/{id} answers it, for scripts

jobs show <id>      one job: status, type, operation, records, applied (created, updated, unchanged; a delete job's:
                    deleted, not found), rejected, when it was created, started and completed, whether it was a dry
                    run, and its message
  --wait              if it has not finished, wait until it has (Ctrl-C stops waiting, not the job)
  --json              the job document, on one line

jobs rejected <id>  the records a finished job rejected, as they were sent, each with why (_error) and its index in
                    its batch (_index), on stdout: fix them and import the file again (importd import ignores the
                    columns and fields whose names start with _)
  --format csv|json   csv (default): a header row of every field the records have, nested ones dotted
                      (geolocation.locationStart), then _error and _index; json: one record per line (NDJSON)

jobs cancel <id>    cancels a job that is still Pending: it ends Failed at once, with nothing applied. A job that is
                    being applied (Processing) or has finished cannot be canceled; the command says which it is.

${connectionUsage}

  Exit code: 0 done; 1 no such job, a job that cannot be canceled, or (jobs rejected) one that has not finished yet;
  2 usage or connection errors, a refused key included.`;

const subcommands = {
  list: ["status", "type", "operation", "dry-run", "no-dry-run", "limit", "all", "json"],
  show: ["wait", "json"],
  rejected: ["format"],
  cancel: [],
} as const satisfies Record<string, readonly string[]>;
type Subcommand = keyof typeof subcommands;

const flags = {
  ...connectionFlags,
  help: { type: "boolean", short: "h" },
  status: { type: "string" },
  type: { type: "string" },
  operation: { type: "string" },
  "dry-run": { type: "boolean" },
  "no-dry-run": { type: "boolean" },
  limit: { type: "string" },
  all: { type: "boolean" },
  json: { type: "boolean" },
  wait: { type: "boolean" },
  format: { type: "string" },
} as const;
type Values = { [name in keyof typeof flags]?: (typeof flags)[name]["type"] extends "string" ? string : boolean };

/** `importd jobs`: the jobs of a running server, through its API, like `importd import`. */
export async function jobsCommand(argv: string[], env: Record<string, string | undefined>, io: Output): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, options: flags, allowPositionals: true, strict: true });
  if (values.help) return io.out(jobsUsage((await import("../resources/registry")).jobTypes)), 0;
  const [action, ...rest] = positionals;
  if (!isSubcommand(action)) throw new UsageError(`${action ? `unknown jobs command '${action}'` : "missing a jobs command"}: use jobs list, jobs show <id>, jobs rejected <id> or jobs cancel <id>`);
  const misplaced = Object.keys(values).find((name) => name !== "help" && !(name in connectionFlags) && !(subcommands[action] as readonly string[]).includes(name));
  if (misplaced) throw new UsageError(`--${misplaced} is not a flag of jobs ${action} (importd jobs --help lists each command's flags)`);
  const id = action === "list" ? undefined : jobId(action, rest);
  if (action === "list" && rest.length > 0) throw new UsageError(`jobs list takes no arguments, got '${rest.join(" ")}'`);
  const listing = action === "list" ? listRequest(values) : undefined;
  const format = action === "rejected" ? rejectedFormat(values.format) : undefined;
  const connection = serverConnection(values, env);
  const client = createClient({ ...connection, retries: 2 });

  try {
    if (listing) return await list(client, listing, values.json ?? false, io);
    if (action === "show") return await show(client, id!, values, io);
    if (action === "rejected") return await rejected(client, id!, format!, io);
    return await cancel(client, id!, io);
  } catch (error) {
    return refused(error, id, connection.baseUrl, io);
  }
}

const isSubcommand = (action: string | undefined): action is Subcommand => action !== undefined && Object.hasOwn(subcommands, action);

/** The one job id the command takes. */
function jobId(action: Subcommand, args: string[]): number {
  const [text] = args;
  if (!text || args.length > 1 || !/^[1-9][0-9]{0,14}$/.test(text)) throw new UsageError(`jobs ${action} takes one job id (a positive whole number)${text ? `, not '${args.join(" ")}'` : ""}`);
  return Number(text);
}

type ListRequest = { filters: { status?: string; type?: string; operation?: string; dryRun?: boolean }; limit: number | "all" };

/** The list's filters and how many, checked before anything is sent; status, type and operation are the server's to check. */
function listRequest(values: Values): ListRequest {
  if (values["dry-run"] && values["no-dry-run"]) throw new UsageError("--dry-run and --no-dry-run do not go together: give one, or neither to list both kinds");
  if (values.all && values.limit !== undefined) throw new UsageError("--all and --limit do not go together: --all lists every job");
  const dryRun = values["dry-run"] ? true : values["no-dry-run"] ? false : undefined;
  const filters = { status: values.status, type: values.type, operation: values.operation, dryRun };
  if (values.all) return { filters, limit: "all" };
  const text = values.limit ?? String(defaultListLimit);
  const limit = Number(text);
  if (!/^\d+$/.test(text) || limit < 1 || limit > maxListLimit) throw new UsageError(`--limit must be a whole number from 1 to ${maxListLimit}, not '${text}' (--all lists every job)`);
  return { filters, limit };
}

function rejectedFormat(format = "csv"): "csv" | "json" {
  if (format !== "csv" && format !== "json") throw new UsageError(`--format must be csv or json, not '${format}'`);
  return format;
}

async function list(client: ImportdClient, { filters, limit }: ListRequest, json: boolean, io: Output): Promise<number> {
  const shown: JobDocument[] = [];
  let after: string | undefined;
  let more = false;
  do {
    const page = await client.listJobs({ ...filters, limit: limit === "all" ? maxListLimit : limit, after });
    // For a script, each job as it comes; a table waits for all of its rows, to size its columns. It needs only the
    // counts: the errors of each job (up to 1000) are not kept for every job of --all.
    if (json) for (const job of page.items) io.out(JSON.stringify(job));
    else shown.push(...page.items.map((job) => ({ ...job, output: job.output && { ...job.output, errors: [] } })));
    after = page.nextCursor ?? undefined;
    // A full page has a cursor even when nothing follows it: one job more says whether something does.
    if (limit !== "all" && after !== undefined) more = (await client.listJobs({ ...filters, limit: 1, after })).items.length > 0;
  } while (limit === "all" && after !== undefined);

  if (!json && shown.length > 0) for (const line of jobTable(shown)) io.out(line);
  const filtered = Object.values(filters).some((value) => value !== undefined);
  if (shown.length === 0 && !json) io.err(filtered ? "No jobs match these filters." : "No jobs in this environment (job documents are kept for a limited time after they finish).");
  if (more) io.err(`These are the newest ${limit}; there are more: --limit <n> (up to ${maxListLimit}) or --all lists them.`);
  return 0;
}

async function show(client: ImportdClient, id: number, values: Values, io: Output): Promise<number> {
  let job = await client.getJob(id);
  if (values.wait && !isTerminal(job.importJobStatus)) {
    io.err(`job ${id} is ${job.importJobStatus}; waiting for it to finish (Ctrl-C stops waiting, not the job)...`);
    let status = job.importJobStatus;
    job = await client.waitForJob(id, {
      onProgress: (now) => {
        if (now.importJobStatus !== status && !isTerminal(now.importJobStatus)) io.err(`job ${id} is ${now.importJobStatus}...`);
        status = now.importJobStatus;
      },
    });
  }
  if (values.json) io.out(JSON.stringify(job));
  else for (const line of jobSummary(job)) io.out(line);
  return 0;
}

// The CSV's header names every column before the first row, so every record's fields must be known first. Up to
// this many records are held from that first reading; a job with more (a whole 100 MB batch can be rejected, when a
// batch-level rule fails it) is read a second time rather than held.
const heldRecords = 10_000;

async function rejected(client: ImportdClient, id: number, format: "csv" | "json", io: Output): Promise<number> {
  let total = 0;
  try {
    if (format === "json") {
      for await (const record of client.rejectedRecords(id)) io.out(rejectedJson(record)), total++;
    } else {
      const columns = new RejectedColumns();
      let held: RejectedRecord[] | undefined = [];
      for await (const record of client.rejectedRecords(id)) {
        columns.add(record);
        total++;
        if (held && held.push(record) > heldRecords) held = undefined;
      }
      if (total > 0) {
        io.out(columns.header);
        for await (const record of held ?? client.rejectedRecords(id)) io.out(columns.row(record));
      }
    }
  } catch (error) {
    // 409: the job has not finished, so which records it rejects is not known yet.
    if (!(error instanceof ImportdProblem && error.status === 409)) throw error;
    const { importJobStatus } = await client.getJob(id);
    io.err(`importd: job ${id} has not finished yet (it is ${importJobStatus}): which records it rejects is known once it has. Wait for it with importd jobs show ${id} --wait, then ask again.`);
    return 1;
  }
  io.err(total === 0 ? `job ${id} rejected no records.` : `job ${id}: ${total.toLocaleString("en-US")} rejected record${total === 1 ? "" : "s"}.`);
  return 0;
}

async function cancel(client: ImportdClient, id: number, io: Output): Promise<number> {
  try {
    const job = await client.cancelJob(id);
    io.out(`job ${job.id}: ${job.importJobStatus}. ${job.output?.message ?? ""}`.trim());
    return 0;
  } catch (error) {
    // 409: Processing or finished; the detail says which.
    if (!(error instanceof ImportdProblem && error.status === 409)) throw error;
    io.err(`importd: job ${id} cannot be canceled: ${error.detail}`);
    return 1;
  }
}

/** What the server refused, or why it could not be asked, in one line: exit 1 for a job that does not exist, else 2. */
function refused(error: unknown, id: number | undefined, baseUrl: string, io: Output): number {
  if (error instanceof ImportdConnectionError) return io.err(`importd: ${error.message}`), 2;
  if (!(error instanceof ImportdProblem)) throw error;
  if (error.status === 404 && id !== undefined) return io.err(`importd: job ${id} was not found: ${error.detail}`), 1;
  if (error.status === 401) return io.err(`importd: ${keyRefused(baseUrl)}`), 2;
  // A filter the server does not know (a 400 keyed by the parameter): said as the flag that sent it.
  const problems = Object.entries(error.errors ?? {}).map(([name, messages]) => `${flagOf[name] ?? name}: ${messages.join(" ")}`);
  io.err(`importd: ${id === undefined ? "" : `job ${id}: `}${problems.length > 0 ? problems.join("; ") : `${error.status} ${error.title}${error.detail ? `: ${error.detail}` : ""}`}`);
  return 2;
}

const flagOf: Record<string, string> = { status: "--status", type: "--type", operation: "--operation", dryRun: "--dry-run", limit: "--limit" };
