import { afterAll, describe, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigError, loadConfig, options } from "../../src/config";
import { parseWebhookAllow, type AllowList } from "../../src/net/allow-list";
import { tempDir } from "../helpers/server";

const dir = tempDir("importd-config-");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// A valid text for each option, different from its default, and its parsed value.
const samples: Record<keyof typeof options, [string, string | number | boolean | readonly string[] | AllowList]> = {
  port: ["9090", 9090],
  host: ["0.0.0.0", "0.0.0.0"],
  tlsCert: ["/etc/importd/cert.pem", "/etc/importd/cert.pem"],
  tlsKey: ["/etc/importd/key.pem", "/etc/importd/key.pem"],
  tlsSan: ["importd.example, 10.0.0.5", ["importd.example", "10.0.0.5"]],
  insecureHttp: ["true", true],
  dataDir: [join(dir, "data"), join(dir, "data")],
  databaseUrl: ["postgres://importd:pw@db.example:5432/importd", "postgres://importd:pw@db.example:5432/importd"],
  workers: ["3", 3],
  maxBodyBytes: ["1048576", 1048576],
  jobRetentionDays: ["7", 7],
  authFailuresPerMinute: ["100", 100],
  shutdownTimeout: ["5", 5],
  trustedProxies: ["10.0.0.0/8, 192.168.1.7,fd00::/8", ["10.0.0.0/8", "192.168.1.7", "fd00::/8"]],
  webhookAllow: ["hooks.example.com, 10.0.0.0/8", parseWebhookAllow("hooks.example.com,10.0.0.0/8")],
  logLevel: ["debug", "debug"],
  logFormat: ["pretty", "pretty"],
  metricsEnvironmentLabels: ["true", true],
  // Request bodies in flight.
  bodyBudgetBytes: ["536870912", 536870912],
  uploadsPerEnvironment: ["2", 2],
  bodyStallSeconds: ["10", 10],
  bodyMinBytesPerSecond: ["0", 0],
  backupDir: [join(dir, "backups"), join(dir, "backups")],
  backupEvery: ["0.5", 0.5],
  backupKeep: ["3", 3],
};
const otherSamples: Record<keyof typeof options, string> = {
  port: "9191",
  host: "::1",
  tlsCert: "/other/cert.pem",
  tlsKey: "/other/key.pem",
  tlsSan: "other.example",
  insecureHttp: "false",
  dataDir: join(dir, "other"),
  databaseUrl: "postgresql://other@localhost/other",
  workers: "5",
  maxBodyBytes: "2048",
  jobRetentionDays: "9",
  authFailuresPerMinute: "0",
  shutdownTimeout: "0",
  trustedProxies: "127.0.0.1",
  webhookAllow: "*.example.org",
  logLevel: "warn",
  logFormat: "json",
  metricsEnvironmentLabels: "false",
  // Request bodies in flight.
  bodyBudgetBytes: "1048576",
  uploadsPerEnvironment: "8",
  bodyStallSeconds: "5",
  bodyMinBytesPerSecond: "1024",
  backupDir: join(dir, "other-backups"),
  backupEvery: "12",
  backupKeep: "30",
};

// Options that need another beside them: a certificate comes with its key.
const companions: Partial<Record<keyof typeof options, Record<string, string>>> = {
  tlsCert: { IMPORTD_TLS_KEY: "/etc/importd/key.pem" },
  tlsKey: { IMPORTD_TLS_CERT: "/etc/importd/cert.pem" },
  backupEvery: { IMPORTD_BACKUP_DIR: join(dir, "backups") },
  backupKeep: { IMPORTD_BACKUP_DIR: join(dir, "backups") },
};

describe("precedence: flag > IMPORTD_* > default, for every option", () => {
  for (const [key, option] of Object.entries(options) as Array<[keyof typeof options, (typeof options)[keyof typeof options]]>) {
    const [text, value] = samples[key];
    const beside = companions[key] ?? {};
    test(`${option.flag}: the default when nothing is given`, () => {
      expect(loadConfig({}, {})[key]).toEqual(option.default);
    });
    test(`${option.flag}: ${option.env} beats the default`, () => {
      expect(loadConfig({}, { ...beside, [option.env]: text })[key]).toEqual(value);
    });
    test(`${option.flag}: --${option.flag} beats ${option.env}`, () => {
      expect(loadConfig({ [option.flag]: text }, { ...beside, [option.env]: otherSamples[key] })[key]).toEqual(value);
    });
  }

  test("the default host is the loopback address, so that the quick start serves plain HTTP to this machine only", () => {
    expect(loadConfig({}, {}).host).toBe("127.0.0.1");
  });

  test("--insecure-http is a flag without a value (parseArgs gives true); its variable takes true or false", () => {
    expect(loadConfig({ "insecure-http": true }, {}).insecureHttp).toBe(true);
    expect(loadConfig({}, { IMPORTD_INSECURE_HTTP: "0" }).insecureHttp).toBe(false);
    expect(() => loadConfig({}, { IMPORTD_INSECURE_HTTP: "sure" })).toThrow("IMPORTD_INSECURE_HTTP must be true or false, not 'sure'");
  });

  test("a certificate without its key (or the other way round), and a certificate with --insecure-http, are refused", () => {
    expect(() => loadConfig({ "tls-cert": "/c.pem" }, {})).toThrow("--tls-cert and --tls-key go together");
    expect(() => loadConfig({}, { IMPORTD_TLS_KEY: "/k.pem" })).toThrow("--tls-cert and --tls-key go together");
    expect(() => loadConfig({ "tls-cert": "/c.pem", "tls-key": "/k.pem", "insecure-http": true }, {})).toThrow("--insecure-http and --tls-cert ask for opposite things");
  });

  test("a body budget below the hard limit is refused, since a body between the two could never be read", () => {
    expect(() => loadConfig({ "body-budget-bytes": "1048576" }, {})).toThrow("--body-budget-bytes (1048576) is less than --max-body-bytes (104857600)");
    expect(loadConfig({ "body-budget-bytes": "1048576", "max-body-bytes": "1048576" }, {}).bodyBudgetBytes).toBe(1048576);
  });

  test("a default main decides (pretty logs on a terminal) is still beaten by IMPORTD_LOG_FORMAT and --log-format", () => {
    expect(loadConfig({}, {}, { logFormat: "pretty" }).logFormat).toBe("pretty");
    expect(loadConfig({}, { IMPORTD_LOG_FORMAT: "json" }, { logFormat: "pretty" }).logFormat).toBe("json");
    expect(loadConfig({ "log-format": "json" }, {}, { logFormat: "pretty" }).logFormat).toBe("json");
  });

  test("--trusted-proxies trusts loopback unless told otherwise: the word loopback is 127.0.0.0/8 and ::1, none trusts no one", () => {
    expect(loadConfig({}, {}).trustedProxies).toEqual(["127.0.0.0/8", "::1"]);
    expect(loadConfig({}, { IMPORTD_TRUSTED_PROXIES: "" }).trustedProxies).toEqual(["127.0.0.0/8", "::1"]);
    expect(loadConfig({ "trusted-proxies": "none" }, {}).trustedProxies).toEqual([]);
    expect(loadConfig({}, { IMPORTD_TRUSTED_PROXIES: " NONE " }).trustedProxies).toEqual([]);
    expect(loadConfig({ "trusted-proxies": "loopback, 10.0.0.0/8" }, {}).trustedProxies).toEqual(["127.0.0.0/8", "::1", "10.0.0.0/8"]);
    expect(options.trustedProxies.shownDefault).toContain("loopback");
    expect(options.trustedProxies.description).toContain("none trusts no one");
  });

  test("an empty variable counts as unset", () => {
    expect(loadConfig({}, { IMPORTD_PORT: "" }).port).toBe(8080);
  });
});

describe("bad values are a ConfigError that names the option and the value", () => {
  const cases: Array<[string, Record<string, string>, Record<string, string>, string]> = [
    ["port 70000", { port: "70000" }, {}, "--port must be a whole number from 0 to 65535, not '70000'"],
    ["port in IMPORTD_PORT", {}, { IMPORTD_PORT: "http" }, "IMPORTD_PORT must be a whole number from 0 to 65535, not 'http'"],
    ["a port with a fraction", { port: "80.5" }, {}, "--port must be a whole number"],
    ["a negative body limit", { "max-body-bytes": "-1" }, {}, "--max-body-bytes must be a whole number from 1 to 1073741824, not '-1'"],
    ["a body limit of 0", {}, { IMPORTD_MAX_BODY_BYTES: "0" }, "IMPORTD_MAX_BODY_BYTES must be a whole number from 1"],
    ["0 workers", { workers: "0" }, {}, "--workers must be a whole number from 1 to 64, not '0'"],
    ["a negative retention", { "job-retention-days": "-3" }, {}, "--job-retention-days must be a whole number from 1 to 3650, not '-3'"],
    ["an unknown log level", { "log-level": "verbose" }, {}, "--log-level must be one of debug, info, warn, error, not 'verbose'"],
    ["an unknown log format", {}, { IMPORTD_LOG_FORMAT: "xml" }, "IMPORTD_LOG_FORMAT must be one of json, pretty, not 'xml'"],
    ["a blank host", { host: " " }, {}, "--host must not be empty"],
    ["a trusted proxy that is not an address", { "trusted-proxies": "10.0.0.0/8,proxy.local" }, {}, "--trusted-proxies: 'proxy.local' is not an address or CIDR range"],
    ["an IPv4 prefix over 32", {}, { IMPORTD_TRUSTED_PROXIES: "10.0.0.0/33" }, "IMPORTD_TRUSTED_PROXIES: '10.0.0.0/33' is not an address or CIDR range"],
    ["an IPv6 prefix over 128", { "trusted-proxies": "fd00::/129" }, {}, "--trusted-proxies: 'fd00::/129' is not an address or CIDR range"],
    ["none beside a range", { "trusted-proxies": "none, 10.0.0.0/8" }, {}, "--trusted-proxies: none trusts no proxy, and goes alone, not beside '10.0.0.0/8'"],
    ["no hours between backups", { "backup-dir": join(dir, "b"), "backup-every": "0" }, {}, "--backup-every must be a number of hours above 0 and at most 8760 (a year), such as 24 or 0.5, not '0'"],
    ["backup hours that are not a number", { "backup-dir": join(dir, "b") }, { IMPORTD_BACKUP_EVERY: "daily" }, "IMPORTD_BACKUP_EVERY must be a number of hours above 0"],
    ["more than a year between backups", { "backup-dir": join(dir, "b"), "backup-every": "9000" }, {}, "--backup-every must be a number of hours above 0 and at most 8760"],
    ["keeping no backup", { "backup-dir": join(dir, "b"), "backup-keep": "0" }, {}, "--backup-keep must be a whole number from 1 to 10000, not '0'"],
    ["--backup-every without --backup-dir", { "backup-every": "6" }, {}, "--backup-every is for scheduled backups, which need --backup-dir <dir> (IMPORTD_BACKUP_DIR)"],
    ["IMPORTD_BACKUP_KEEP without a backup directory", {}, { IMPORTD_BACKUP_KEEP: "3" }, "IMPORTD_BACKUP_KEEP is for scheduled backups, which need --backup-dir <dir>"],
    ["scheduled backups on PostgreSQL", { "backup-dir": join(dir, "b"), "database-url": "postgres://u:p@db/x" }, {}, "--backup-dir backs up the SQLite appliance; a PostgreSQL database is backed up with PostgreSQL's own tools (pg_dump"],
    ["backups into the data directory", { "backup-dir": join(dir, "d"), "data-dir": join(dir, "d") }, {}, "--backup-dir must not be the data directory"],
    ["an empty list of trusted proxies", { "trusted-proxies": " , " }, {}, "--trusted-proxies is empty: give none to trust no proxy"],
  ];
  for (const [name, flags, env, message] of cases) {
    test(name, () => {
      expect(() => loadConfig(flags, env)).toThrow(ConfigError);
      expect(() => loadConfig(flags, env)).toThrow(message);
    });
  }

  test("a database URL that is not PostgreSQL's is refused, and the message never repeats it (it may hold a password)", () => {
    for (const [flags, env, name] of [
      [{ "database-url": "mysql://root:hunter2@db/x" }, {}, "--database-url"],
      [{}, { IMPORTD_DATABASE_URL: "hunter2@db/x" }, "IMPORTD_DATABASE_URL"],
      [{ "database-url": "postgres://:hunter2@/x" }, {}, "--database-url"],
    ] as const) {
      let message = "";
      try {
        loadConfig(flags, env);
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        message = (error as Error).message;
      }
      expect(message).toBe(`${name} must be a PostgreSQL URL, postgres://user:password@host:port/database`);
      expect(message).not.toContain("hunter2");
    }
  });

  test("a data directory that is a file", () => {
    const file = join(dir, "a-file");
    writeFileSync(file, "");
    expect(() => loadConfig({ "data-dir": file }, {})).toThrow(`--data-dir '${file}' is a file, not a directory`);
    expect(() => loadConfig({}, { IMPORTD_DATA_DIR: join(file, "sub") })).toThrow(`IMPORTD_DATA_DIR '${join(file, "sub")}' cannot be created: '${file}' is a file`);
  });

  test("a data directory that does not exist yet is fine (it is created on start)", () => {
    expect(loadConfig({ "data-dir": join(dir, "new", "deeper") }, {}).dataDir).toBe(join(dir, "new", "deeper"));
  });
});
