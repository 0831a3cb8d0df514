import { accessSync, constants, existsSync, statSync } from "node:fs";
import { availableParallelism, userInfo } from "node:os";
import { dirname, resolve } from "node:path";
import { parseWebhookAllow, type AllowList } from "./net/allow-list";
import { parseCidr } from "./net/cidr";

/**
 * Configuration: flags beat IMPORTD_* environment variables, which beat defaults. Read once in main,
 * validated, frozen and handed down; nothing else reads process.env.
 */

export class ConfigError extends Error {}

type Option<T> = {
  flag: string;
  env: string;
  description: string;
  default: T;
  parse: (text: string, name: string) => T;
  /** How --help shows the default, when not as it is. */
  shownDefault?: string;
  /** Checked on the value in effect, the default included. */
  check?(value: T, name: string): void;
  /** A flag that takes no value (`--insecure-http`); its variable takes true or false. */
  boolean?: true;
};

const integer = (min: number, max: number) => (text: string, name: string) => {
  const value = Number(text);
  if (!/^-?\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be a whole number from ${min} to ${max}, not '${text}'`);
  }
  return value;
};
const oneOf = <T extends string>(values: readonly T[]) => (text: string, name: string) => {
  if (!values.includes(text as T)) throw new ConfigError(`${name} must be one of ${values.join(", ")}, not '${text}'`);
  return text as T;
};
const nonEmpty = (text: string, name: string) => {
  if (text.trim() === "") throw new ConfigError(`${name} must not be empty`);
  return text;
};

// Checked up front, so that a data directory that cannot work is one clear line, not a stack trace from SQLite.
const usableDirectory = (path: string, name: string) => {
  let existing = resolve(path);
  while (!existsSync(existing)) existing = dirname(existing);
  if (!statSync(existing).isDirectory()) {
    throw new ConfigError(
      existing === resolve(path) ? `${name} '${path}' is a file, not a directory` : `${name} '${path}' cannot be created: '${existing}' is a file, not a directory`,
    );
  }
  try {
    accessSync(existing, constants.W_OK);
  } catch {
    throw new ConfigError(`${name} '${path}' is not writable by the user ${userInfo().username}: give it that user, or choose another directory`);
  }
};

// A week of seconds at most, 36 ms at least (tests take one every few seconds).
const hours = (text: string, name: string) => {
  const value = Number(text);
  if (!/^\s*(\d+\.?\d*|\.\d+)\s*$/.test(text) || !(value >= 0.00001 && value <= 8760)) {
    throw new ConfigError(`${name} must be a number of hours above 0 and at most 8760 (a year), such as 24 or 0.5, not '${text}'`);
  }
  return value;
};

const yesOrNo = (text: string, name: string): boolean => {
  if (/^(true|1|yes)$/i.test(text.trim())) return true;
  if (/^(false|0|no)$/i.test(text.trim())) return false;
  throw new ConfigError(`${name} must be true or false, not '${text}'`);
};

const list = (text: string): readonly string[] => Object.freeze(text.split(",").map((part) => part.trim()).filter((part) => part !== ""));

const cidrList = (text: string, name: string): readonly string[] => {
  const cidrs = text.split(",").map((part) => part.trim()).filter((part) => part !== "");
  for (const cidr of cidrs) {
    try {
      parseCidr(cidr);
    } catch (error) {
      throw new ConfigError(`${name}: ${(error as Error).message}`);
    }
  }
  return Object.freeze(cidrs);
};

/** What `loopback` stands for in --trusted-proxies, and its default: a proxy on this machine, as gunicorn and uvicorn trust. */
const loopbackProxies: readonly string[] = Object.freeze(["127.0.0.0/8", "::1"]);

// `none` trusts no one and goes alone; `loopback` may stand beside ranges. An empty value says neither, so it is refused
// rather than guessed.
const trustedProxyList = (text: string, name: string): readonly string[] => {
  const entries = text.split(",").map((part) => part.trim()).filter((part) => part !== "");
  if (entries.length === 0) throw new ConfigError(`${name} is empty: give none to trust no proxy, or the proxies' addresses or ranges (loopback, 10.0.0.0/8, ...)`);
  const words = entries.map((entry) => entry.toLowerCase());
  if (words.includes("none")) {
    if (entries.length > 1) throw new ConfigError(`${name}: none trusts no proxy, and goes alone, not beside '${entries.find((_, i) => words[i] !== "none")}'`);
    return Object.freeze([]);
  }
  return cidrList(words.flatMap((word, i) => (word === "loopback" ? loopbackProxies : [entries[i]!])).join(","), name);
};

// Checked here, so that a mistyped URL is one clear line; the password is never repeated back.
const databaseUrl = (text: string, name: string): string | undefined => {
  if (text.trim() === "") return undefined;
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    // Shown below without the text, which may hold a password.
  }
  if (!url || !["postgres:", "postgresql:"].includes(url.protocol) || url.hostname === "") {
    throw new ConfigError(`${name} must be a PostgreSQL URL, postgres://user:password@host:port/database`);
  }
  return text;
};

const megabyte = 1024 * 1024;

export const options = {
  port: { flag: "port", env: "IMPORTD_PORT", description: "TCP port to listen on (0 picks a free one)", default: 8080, parse: integer(0, 65535) },
  host: {
    flag: "host",
    env: "IMPORTD_HOST",
    description: "address to listen on: on a loopback address plain HTTP, on any other HTTPS (see --tls-cert)",
    default: "127.0.0.1",
    parse: nonEmpty,
  },
  tlsCert: {
    flag: "tls-cert",
    env: "IMPORTD_TLS_CERT",
    description: "PEM certificate, its chain after it, to serve HTTPS with on any address, loopback included; a renewed file is used without a restart",
    default: undefined as string | undefined,
    shownDefault: "none: on an address other than loopback, a self-signed certificate made in --data-dir",
    parse: nonEmpty,
  },
  tlsKey: { flag: "tls-key", env: "IMPORTD_TLS_KEY", description: "the PEM private key of --tls-cert, unencrypted", default: undefined as string | undefined, shownDefault: "none", parse: nonEmpty },
  tlsSan: {
    flag: "tls-san",
    env: "IMPORTD_TLS_SAN",
    description: "comma-separated host names and addresses the self-signed certificate names besides this host's name, localhost and the listening addresses",
    default: Object.freeze([]) as readonly string[],
    shownDefault: "none",
    parse: list,
  },
  insecureHttp: {
    flag: "insecure-http",
    env: "IMPORTD_INSECURE_HTTP",
    description: "serve plain HTTP on an address other than loopback: API keys and data cross the network unencrypted (only behind a TLS proxy, on a network you trust)",
    default: false,
    parse: yesOrNo,
    boolean: true,
  },
  dataDir: { flag: "data-dir", env: "IMPORTD_DATA_DIR", description: "directory of the SQLite database", default: "./data", parse: nonEmpty, check: usableDirectory },
  databaseUrl: {
    flag: "database-url",
    env: "IMPORTD_DATABASE_URL",
    description: "PostgreSQL database to use instead of SQLite in --data-dir, postgres://user:password@host:port/database; several instances may share it",
    default: undefined as string | undefined,
    shownDefault: "none: SQLite in --data-dir",
    parse: databaseUrl,
  },
  workers: { flag: "workers", env: "IMPORTD_WORKERS", description: "worker threads for parsing, validation and upserts", default: Math.max(2, availableParallelism()), parse: integer(1, 64) },
  maxBodyBytes: { flag: "max-body-bytes", env: "IMPORTD_MAX_BODY_BYTES", description: "request body hard limit in bytes (larger: 413)", default: 100 * megabyte, parse: integer(1, 1024 * megabyte) },
  jobRetentionDays: { flag: "job-retention-days", env: "IMPORTD_JOB_RETENTION_DAYS", description: "days a finished job's document is kept", default: 30, parse: integer(1, 3650) },
  authFailuresPerMinute: { flag: "auth-failures-per-minute", env: "IMPORTD_AUTH_FAILURES_PER_MINUTE", description: "wrong API keys one client may send per minute before it gets 429, counted per address (an IPv6 client per /64), this machine's own included (0: no limit)", default: 30, parse: integer(0, 1_000_000) },
  shutdownTimeout: { flag: "shutdown-timeout", env: "IMPORTD_SHUTDOWN_TIMEOUT", description: "seconds a stop waits for running requests and jobs; then their transactions are rolled back and the jobs rerun at the next start", default: 30, parse: integer(0, 3600) },
  trustedProxies: {
    flag: "trusted-proxies",
    env: "IMPORTD_TRUSTED_PROXIES",
    description:
      "comma-separated addresses or CIDR ranges of reverse proxies whose X-Forwarded-For is believed, for the client address in the log and the failed-key limit; loopback stands for 127.0.0.0/8 and ::1 (a proxy on this machine), none trusts no one",
    default: loopbackProxies,
    shownDefault: "loopback: 127.0.0.0/8 and ::1",
    parse: trustedProxyList,
  },
  webhookAllow: {
    flag: "webhook-allow",
    env: "IMPORTD_WEBHOOK_ALLOW",
    description:
      "comma-separated destinations webhooks may be sent to: host names (hooks.example.com, *.example.com, or * for any) and CIDR ranges (203.0.113.0/24); private, loopback and link-local addresses only where a range names them (or loopback, by naming localhost)",
    default: parseWebhookAllow(""),
    shownDefault: "none: webhooks are off",
    parse: (text: string, name: string): AllowList => {
      try {
        return parseWebhookAllow(text);
      } catch (error) {
        throw new ConfigError((error as Error).message.replace(/^--webhook-allow/, name));
      }
    },
  },
  // Off by default: /metrics needs no key, and an environment's name is for its key holders (DECISIONS 15).
  metricsEnvironmentLabels: {
    flag: "metrics-environment-labels",
    env: "IMPORTD_METRICS_ENVIRONMENT_LABELS",
    description: "label /metrics series by environment (queue depth per environment): /metrics needs no key, so whoever reaches it then learns every environment's name and load; without it, totals only",
    default: false,
    parse: yesOrNo,
    boolean: true,
    },
  // Request bodies in flight (DECISIONS 15, http/uploads.ts): what one environment's key holder can make the server hold.
  bodyBudgetBytes: {
    flag: "body-budget-bytes",
    env: "IMPORTD_BODY_BUDGET_BYTES",
    description:
      "request-body bytes held in memory at once, across the server; an upload whose Content-Length does not fit in what is left gets 503 with Retry-After before its body is read, a chunked one when its buffer outgrows it. One environment may hold half of it, but at least one body at --max-body-bytes (past that, 429)",
    default: 256 * megabyte,
    shownDefault: "268435456, 256 MiB",
    parse: integer(1, 64 * 1024 * megabyte),
  },
  uploadsPerEnvironment: {
    flag: "uploads-per-environment",
    env: "IMPORTD_UPLOADS_PER_ENVIRONMENT",
    description: "request bodies over 64 KiB one environment may send at once; one more gets 429 with Retry-After before its body is read (smaller bodies count only in --body-budget-bytes)",
    default: 4,
    parse: integer(1, 1000),
  },
  bodyStallSeconds: {
    flag: "body-stall-seconds",
    env: "IMPORTD_BODY_STALL_SECONDS",
    description: "a request body of which no byte arrives for this long is cut off with 408 and its connection closed; also the grace before --body-min-bytes-per-second applies (a body of up to 16 MB with a Content-Length is read in one go: it has this plus its length at that rate, at most 250 s)",
    default: 30,
    parse: integer(1, 3600),
  },
  bodyMinBytesPerSecond: {
    flag: "body-min-bytes-per-second",
    env: "IMPORTD_BODY_MIN_BYTES_PER_SECOND",
    description: "after the grace of --body-stall-seconds, a request body arriving at under this average rate is cut off with 408 and its connection closed (0: no minimum)",
    default: 32 * 1024,
    parse: integer(0, 1024 * megabyte),
  },
  // Scheduled backups of the SQLite appliance (DECISIONS 14, docs/operations/backup.md).
  backupDir: {
    flag: "backup-dir",
    env: "IMPORTD_BACKUP_DIR",
    description: "take a backup of the SQLite database into this directory every --backup-every hours, while serving (as importd storage backup does); best on another disk",
    default: undefined as string | undefined,
    shownDefault: "none: no scheduled backups",
    parse: nonEmpty,
    check: (value: string | undefined, name: string) => value !== undefined && usableDirectory(value, name),
  },
  backupEvery: {
    flag: "backup-every",
    env: "IMPORTD_BACKUP_EVERY",
    description: "hours between scheduled backups (fractions too: 0.5 is half an hour); the first is taken one interval after the start, a failed one is tried again sooner",
    default: 24,
    parse: hours,
  },
  backupKeep: { flag: "backup-keep", env: "IMPORTD_BACKUP_KEEP", description: "scheduled backups kept in --backup-dir; older ones of importd's are removed after each new one", default: 7, parse: integer(1, 10_000) },
  logLevel: { flag: "log-level", env: "IMPORTD_LOG_LEVEL", description: "debug, info, warn or error", default: "info", parse: oneOf(["debug", "info", "warn", "error"] as const) },
  logFormat: {
    flag: "log-format",
    env: "IMPORTD_LOG_FORMAT",
    description: "json (one object per line) or pretty",
    default: "json" as "json" | "pretty",
    shownDefault: "json, or pretty when stderr is a terminal",
    parse: oneOf(["json", "pretty"] as const),
  },
} satisfies Record<string, Option<unknown>>;

type Options = typeof options;

/**
 * Hooks for tests, handed to main() by tests/fixtures/with-test-hooks.ts or to startServer by a test: nothing in
 * the shipped program sets them (no flag, no variable), so an operator cannot turn them on by mistake.
 * `killProcessOnRecordId`: a run about to apply a record with this id kills the whole server process, as a job
 * that crashes it would. `maxAttempts`: raises the attempts a job is given (jobs/apply.ts), for tests that SIGKILL
 * the server at random moments as an operator might, which can hit one job's runs three times without that job
 * being at fault. `killProcessAfterCommitOnRecordId`: the same, right after the run that applied the record
 * commits (its webhook events are in the outbox, none sent yet). `webhookRetryScale`: multiplies the webhook retry
 * delays and their 24 hours, so that a test sees a day of retries in seconds. `syncLifetimeMs`: instead of a sync's 24
 * hours (domain/job.ts, syncLifetimeMs), so that a test sees one expire. `copyHoldsAfterTable`: `storage copy` waits,
 * in its transaction, once it has written this table, so that a test kills it there and not by luck.
 * `exportHold`: called as each export begins; given a promise, the export sends its first chunk, then waits for it
 * before reading on, so that a test holds exports mid-way while it commits changes (a function: for a server in the
 * test's own process only, and never posted to a thread).
 */
export type TestHooks = { killProcessOnRecordId?: string; killProcessAfterCommitOnRecordId?: string; maxAttempts?: number; webhookRetryScale?: number; syncLifetimeMs?: number; exportStallMs?: number; exportThreadEndsAfterChunks?: number; exportHold?: () => Promise<void> | undefined; copyHoldsAfterTable?: string };

export type Config = Readonly<{ [K in keyof Options]: Options[K]["default"] } & { testHooks?: TestHooks }>;

/**
 * Builds the frozen config from parsed flags (as strings) and the environment. `defaults` replaces
 * defaults that depend on where the process runs (main decides them: a terminal gets pretty logs).
 */
export function loadConfig(flags: Record<string, string | boolean | undefined>, env: Record<string, string | undefined>, defaults: Partial<Config> = {}): Config {
  const config: Record<string, unknown> = {};
  for (const [key, option] of Object.entries(options) as Array<[keyof Config, Option<unknown>]>) {
    const fromFlag = flags[option.flag] === undefined ? undefined : String(flags[option.flag]);
    const fromEnv = env[option.env];
    const name = fromFlag !== undefined ? `--${option.flag}` : fromEnv !== undefined && fromEnv !== "" ? option.env : `the default --${option.flag}`;
    if (fromFlag !== undefined) config[key] = option.parse(fromFlag, name);
    else if (fromEnv !== undefined && fromEnv !== "") config[key] = option.parse(fromEnv, name);
    else config[key] = key in defaults ? defaults[key] : option.default;
    option.check?.(config[key], name);
  }
  if ((config.tlsCert === undefined) !== (config.tlsKey === undefined)) {
    throw new ConfigError(`--tls-cert and --tls-key go together: give both, the certificate and its key (or neither, for a self-signed certificate)`);
  }
  // Otherwise every body between the two would be refused 503 for ever, however idle the server.
  if ((config.bodyBudgetBytes as number) < (config.maxBodyBytes as number)) {
    throw new ConfigError(`--body-budget-bytes (${config.bodyBudgetBytes}) is less than --max-body-bytes (${config.maxBodyBytes}): a body between the two could never be read. Raise the budget, or lower the hard limit`);
  }
  if (config.tlsCert !== undefined && config.insecureHttp) throw new ConfigError("--insecure-http and --tls-cert ask for opposite things: serve HTTPS with the certificate, or plain HTTP, not both");
  // A schedule's flags without the directory would be ignored without a word.
  if (config.backupDir === undefined) {
    for (const option of [options.backupEvery, options.backupKeep]) {
      const given = flags[option.flag] !== undefined ? `--${option.flag}` : env[option.env] ? option.env : undefined;
      if (given) throw new ConfigError(`${given} is for scheduled backups, which need --backup-dir <dir> (IMPORTD_BACKUP_DIR): the directory to keep them in`);
    }
  } else if (config.databaseUrl !== undefined) {
    throw new ConfigError("--backup-dir backs up the SQLite appliance; a PostgreSQL database is backed up with PostgreSQL's own tools (pg_dump, or base backups and WAL archiving: docs/operations/backup.md)");
  } else if (resolve(config.backupDir as string) === resolve(config.dataDir as string)) {
    throw new ConfigError("--backup-dir must not be the data directory: give the backups a directory of their own, best on another disk");
  }
  if (defaults.testHooks) config.testHooks = Object.freeze({ ...defaults.testHooks });
  return Object.freeze(config) as Config;
}

export function optionsHelp(): string {
  return Object.values(options as Record<string, Option<unknown>>)
    .map((option) => `  --${option.flag.padEnd(20)} ${option.description} (default ${option.shownDefault ?? option.default}; env ${option.env})`)
    .join("\n");
}

/** The flags for node:util's parseArgs: a value for each, but for the boolean ones. */
export const parseArgsOptions = () =>
  Object.fromEntries(Object.values(options as Record<string, Option<unknown>>).map((option) => [option.flag, { type: option.boolean ? ("boolean" as const) : ("string" as const) }]));
