#!/usr/bin/env bun
// argv → command. The only place that calls process.exit.
import { parseArgs } from "node:util";
import pkg from "../package.json" with { type: "json" };
import { AccessError } from "./access/access";
import { UsageError, type Output } from "./cli/errors";
import { ConfigError, loadConfig, optionsHelp, parseArgsOptions, type TestHooks } from "./config";
import { DatabaseError, StoreInUse } from "./store/errors";
import { reachableOn } from "./tls/transport";

// Each command's modules are loaded when it runs: `importd import` of a small file would otherwise spend most of
// its time loading the server.

const usage = `importd ${pkg.version}: asynchronous bulk-import service

Usage:
  importd [serve] [options]        start the HTTP API (the default command)
  importd env create <slug>        create an environment (slug: a-z, 0-9, '-', up to 63 characters)
  importd env list                 list environments
  importd key create <slug>        issue an API key for an environment; prints the key alone on stdout
  importd key list <slug>          list an environment's keys (ids and dates, never secrets)
  importd key revoke <keyId>       revoke a key; takes effect at once, also on a running server
  importd import <file> --resource <resource> --base-url <url>
                                   import a CSV, NDJSON or JSON file in chunks (importd import --help)
  importd delete <file of ids> --resource <resource> --base-url <url>
                                   delete the records a file names, one id per line or a CSV/NDJSON/JSON
                                   file's ids, in chunks (importd delete --help)
  importd export --resource <resource> --base-url <url> [--format csv|ndjson] [-o <file>] [--updated-since <time>]
                                   every record of a resource from one snapshot, in id order, as NDJSON or
                                   as CSV that importd import reads back (importd export --help)
  importd jobs list --base-url <url> [--status <status>] [--type <type>] [--operation upsert|delete]
                    [--limit <n> | --all] [--json]
                                   list an environment's jobs, newest first
  importd jobs show <id> --base-url <url> [--wait] [--json]
                                   a job's status, counts, times and message (--wait: once it has finished)
  importd jobs rejected <id> --base-url <url> [--format csv|json]
                                   the records a finished job rejected, as CSV or NDJSON, to fix and import again
  importd jobs cancel <id> --base-url <url>
                                   cancel a job that is still Pending (importd jobs --help for all of them)
  importd webhook add <url> | list | test <id> | remove <id> --base-url <url>
                                   an environment's webhook subscriptions (importd webhook --help)
  importd storage backup --data-dir <dir> --to <file>
                                   back up the appliance's data into one checked file, beside a running server
  importd storage restore --from <file> --data-dir <dir> [--force]
                                   put a backup in place as the data directory's database (server stopped)
  importd storage copy --data-dir <dir> --to <postgres-url>
                                   copy a stopped appliance's data into an empty PostgreSQL database
  importd storage copy --from <postgres-url> --data-dir <dir>
                                   copy a PostgreSQL importd database into a new SQLite data directory
                                   (importd storage --help for all four)
  importd tls fingerprint          the SHA-256 fingerprint of the certificate importd serves (--tls-cert,
                                   or the one it made in --data-dir), for clients to check
  importd --help | --version

Options (flags beat environment variables, which beat defaults):
${optionsHelp()}
`;

const io: Output = { out: (line) => console.log(line), err: (line) => console.error(line) };

// parseArgs takes `--port -1` for a flag without a value; read a negative number as the value,
// so that the answer says what is wrong with it.
const negativeValuesJoined = (argv: string[]) =>
  argv.flatMap((arg, i) => {
    if (/^-\d/.test(arg) && argv[i - 1]?.startsWith("--") && !argv[i - 1]!.includes("=")) return [];
    if (arg.startsWith("--") && !arg.includes("=") && /^-\d/.test(argv[i + 1] ?? "")) return [`${arg}=${argv[i + 1]}`];
    return [arg];
  });

/** `--help` after a command group that has its own help (`importd env --help`); the whole usage otherwise, `serve --help` included. */
async function helpFor(command: string | undefined): Promise<string> {
  if (command === "env") return (await import("./cli/commands")).envUsage;
  if (command === "key") return (await import("./cli/commands")).keyUsage;
  return usage;
}

/** Runs one command; `testHooks` only from tests/fixtures/with-test-hooks.ts (see Config's TestHooks). */
export async function main(argv: string[], { testHooks }: { testHooks?: TestHooks } = {}): Promise<number> {
  // The client command has flags of its own, none of the server's.
  if (argv[0] === "import" || argv[0] === "delete") {
    // Ctrl-C: the journal already holds every request that went through, so the same command resumes. 130 is
    // 128 + SIGINT, what shells and scripts expect of a program stopped by Ctrl-C.
    process.once("SIGINT", () => {
      io.err("\nimportd: interrupted. Run the same command again to resume where it stopped: the requests that went through are not sent again.");
      process.exit(130);
    });
    if (argv[0] === "delete") return (await import("./cli/delete-command")).deleteCommand(argv.slice(1), process.env, io, process.stderr.isTTY === true);
    const { importCommand } = await import("./cli/import-command");
    return importCommand(argv.slice(1), process.env, io, process.stderr.isTTY === true);
  }
  if (argv[0] === "export") {
    process.once("SIGINT", () => {
      io.err("\nimportd: interrupted; nothing was written to the output file (stdout has what came before).");
      process.exit(130);
    });
    return (await import("./cli/export-command")).exportCommand(argv.slice(1), process.env, io, process.stderr.isTTY === true);
  }
  if (argv[0] === "jobs") return (await import("./cli/jobs-command")).jobsCommand(argv.slice(1), process.env, io);
  if (argv[0] === "webhook") return (await import("./cli/webhook-command")).webhookCommand(argv.slice(1), process.env, io);
  if (argv[0] === "storage") return (await import("./cli/storage-command")).storageCommand(argv.slice(1), process.env, io, testHooks);
  const { values, positionals } = parseArgs({
    args: negativeValuesJoined(argv),
    options: { ...parseArgsOptions(), help: { type: "boolean", short: "h" }, version: { type: "boolean", short: "v" } },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) return io.out(await helpFor(positionals[0])), 0;
  if (values.version) return io.out(pkg.version), 0;
  // Pretty logs for a person at a terminal, JSON for a journal or a log collector.
  const config = loadConfig(values as Record<string, string | boolean | undefined>, process.env, { logFormat: process.stderr.isTTY ? "pretty" : "json", testHooks });
  const [command = "serve", ...rest] = positionals;

  if (command === "env") return await (await import("./cli/commands")).envCommand(config, rest, io), 0;
  if (command === "key") return await (await import("./cli/commands")).keyCommand(config, rest, io), 0;
  if (command === "tls") return (await import("./cli/tls-command")).tlsCommand(config, rest, io), 0;
  if (command !== "serve") throw new UsageError(`unknown command '${command}'`);
  if (rest.length > 0) throw new UsageError(`serve takes no arguments, got '${rest.join(" ")}'`);

  const [{ createLog }, { startServer }, { describeLocation }] = await Promise.all([import("./log"), import("./server"), import("./store/open")]);
  const log = createLog(config);
  // Handlers go in before the server starts: a supervisor may send SIGTERM as soon as it sees the
  // "listening" line, and Bun installs a signal handler only some time after process.on returns.
  let signals = 0;
  let stop: ((signal: string) => void) | undefined;
  let stopAsked: string | undefined;
  const shutdown = (signal: string) => {
    // First signal: stop taking work and finish; second: leave now (upserts make the rerun safe).
    if (++signals > 1) process.exit(1);
    if (stop) stop(signal);
    else stopAsked = signal;
  };
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
  // A renewed certificate: served to new connections, without a restart.
  let reload: ((trigger: "SIGHUP") => void) | undefined;
  process.on("SIGHUP", () => reload?.("SIGHUP"));

  const server = await startServer(config, log);
  reload = server.reloadCertificate;
  if (server.firstRunKey) {
    io.out(`First run: created the environment 'default' and its API key. It is shown only this once; keep it:\n\n  ${server.firstRunKey}\n`);
  }
  const certificate = server.certificate;
  if (certificate?.createdNow) {
    io.out(
      `Made a self-signed TLS certificate for this server, ${certificate.path} (for ${certificate.names}).\n` +
        `Its SHA-256 fingerprint (again at any time: importd tls fingerprint):\n\n  ${certificate.fingerprint}\n\n` +
        `Clients trust it by that file: curl --cacert ${certificate.path}, importd import --ca-file ${certificate.path}\n`,
    );
  }
  const reachable = reachableOn(config.host);
  const transport = certificate
    ? `HTTPS${reachable ? ` ${reachable}` : ""}, certificate ${certificate.path}`
    : config.insecureHttp
      ? `plain HTTP on the network: --insecure-http${reachable ? `; ${reachable}` : ""}`
      : "plain HTTP, this machine only";
  io.out(`importd listening on ${server.url} (${transport}; ${describeLocation(config)}); console: ${server.url}/console; Swagger UI: ${server.url}/swagger`);
  log({ msg: "listening", url: server.url, tls: certificate !== undefined, store: describeLocation(config), workers: config.workers, ...(certificate ? { certificate: certificate.path, fingerprint: certificate.fingerprint } : {}) });

  stop = (signal) => {
    log({ msg: "shutting down", signal });
    server.stop().then(() => process.exit(0), () => process.exit(1));
  };
  if (stopAsked) stop(stopAsked);
  return -1;
}

/** Exits as the command's outcome says: its code, or 2 for a usage or configuration mistake, 1 for another failure. */
export function exitWith(outcome: Promise<number>): void {
  outcome.then(
    (code) => {
      if (code >= 0) process.exit(code);
    },
    (error) => {
      // Usage and configuration mistakes exit 2, other known failures 1, each as one line; only a bug shows a stack.
      const usageMistake = error instanceof UsageError || (error as { code?: string })?.code?.startsWith?.("ERR_PARSE_ARGS");
      const badValue = usageMistake || error instanceof ConfigError;
      const known = badValue || error instanceof AccessError || (error as Error)?.name === "StartupError" || error instanceof DatabaseError || error instanceof StoreInUse;
      console.error(`importd: ${known ? (error as Error).message : (error as Error)?.stack ?? error}`);
      if (usageMistake) console.error("Run importd --help for usage.");
      process.exit(badValue ? 2 : 1);
    },
  );
}

if (import.meta.main) exitWith(main(process.argv.slice(2)));
