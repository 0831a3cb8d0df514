import { afterAll, beforeAll, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { importd, spawnServer, type ServerProcess } from "../helpers/process";
import { tempDir } from "../helpers/server";

// The clients over HTTPS (DECISIONS 9): `importd import` and `importd jobs` trust the server's own certificate with
// --ca-file (IMPORTD_CA_FILE); without it they say what to do, with the fingerprint to compare. Never a silent
// "ignore certificate errors".

let server: ServerProcess;
let plain: ServerProcess;
let dataDir: string;
let certificate: string;
let port: number;
const work = tempDir("importd-tls-client-");
beforeAll(async () => {
  dataDir = join(work, "data");
  server = await spawnServer(dataDir, ["--host", "0.0.0.0"]);
  plain = await spawnServer(join(work, "plain"), []);
  certificate = join(dataDir, "tls", "importd.crt");
  port = Number(new URL(server.url).port);
  // Two servers, one making its certificate: longer than bun's 5 s for a hook on a busy machine.
}, 30_000);
afterAll(() => {
  server?.proc.kill("SIGKILL");
  plain?.proc.kill("SIGKILL");
  rmSync(work, { recursive: true, force: true });
});

const file = (name: string, records: unknown[]) => {
  const path = join(work, name);
  writeFileSync(path, records.map((record) => JSON.stringify(record)).join("\n") + "\n");
  return path;
};

test("importd import round-trips a file over HTTPS trusting the server's certificate by --ca-file, or IMPORTD_CA_FILE", async () => {
  const base = `https://localhost:${port}/default`;
  const flagged = await importd(["import", file("north.ndjson", [{ id: "n1", name: "North" }, { id: "n2", name: "North 2" }]), "--resource", "subareas", "--base-url", base, "--ca-file", certificate], { IMPORTD_API_KEY: server.firstRunKey! });
  expect({ code: flagged.code, stderr: flagged.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
  expect(flagged.stdout).toContain("2 records, 2 applied, 0 rejected");
  const fromEnv = await importd(["import", file("south.ndjson", [{ id: "s1", name: "South" }]), "--resource", "subareas", "--base-url", base], { IMPORTD_API_KEY: server.firstRunKey!, IMPORTD_CA_FILE: certificate });
  expect(fromEnv.code).toBe(0);
  expect(fromEnv.stdout).toContain("1 record");
}, 30_000);

test("without --ca-file, the untrusted certificate is one line that says what to pass and shows the fingerprint to check; nothing is sent", async () => {
  const fingerprint = (await importd(["tls", "fingerprint", "--data-dir", dataDir])).stdout.trim();
  const refused = await importd(["import", file("east.ndjson", [{ id: "e1", name: "East" }]), "--resource", "subareas", "--base-url", `https://localhost:${port}/default`], { IMPORTD_API_KEY: server.firstRunKey! });
  expect(refused.code).toBe(2);
  const line = refused.stderr.trim();
  expect(line.split("\n")).toHaveLength(1);
  expect(line).toContain("the server's TLS certificate is not trusted here");
  expect(line).toContain("pass --ca-file <the server's certificate>");
  expect(line).toContain(`SHA-256 fingerprint ${fingerprint}`);
  expect(line).toEndWith("Nothing of this import was queued. Run the command again with the certificate trusted: the import resumes where it stopped.");
  const ca = await Bun.file(certificate).text();
  const record = await fetch(`https://localhost:${port}/default/v2/subareas/e1`, { headers: { "api-key": server.firstRunKey! }, tls: { ca } } as RequestInit);
  expect(record.status).toBe(404);
  const jobs = await importd(["jobs", "cancel", "1", "--base-url", `https://localhost:${port}/default`, "--api-key", server.firstRunKey!]);
  expect(jobs.code).toBe(2);
  expect(jobs.stderr).toContain(`SHA-256 fingerprint ${fingerprint}`);
  const canceled = await importd(["jobs", "cancel", "1", "--base-url", `https://localhost:${port}/default`, "--api-key", server.firstRunKey!, "--ca-file", certificate]);
  expect(canceled.stderr).not.toContain("certificate");
}, 30_000);

test("a name the certificate does not have, and https:// to a plain HTTP server, are said as such", async () => {
  const wrongName = await importd(["jobs", "cancel", "1", "--base-url", `https://127.0.0.2:${port}/default`, "--api-key", server.firstRunKey!, "--ca-file", certificate]);
  expect(wrongName.code).toBe(2);
  expect(wrongName.stderr).toContain("the server's TLS certificate is not for 127.0.0.2 (it names DNS:");
  const notTls = await importd(["jobs", "cancel", "1", "--base-url", `https://127.0.0.1:${new URL(plain.url).port}/default`, "--api-key", plain.firstRunKey!]);
  expect(notTls.code).toBe(2);
  expect(notTls.stderr).toContain("the server does not speak HTTPS on this port (use http://)");
}, 60_000);

test("--ca-file that is missing, or is not a certificate, is a usage error", async () => {
  const missing = await importd(["jobs", "cancel", "1", "--base-url", `https://localhost:${port}/default`, "--api-key", "k_1", "--ca-file", join(work, "nowhere.crt")]);
  expect({ code: missing.code, line: missing.stderr.split("\n")[0] }).toEqual({ code: 2, line: `importd: --ca-file ${join(work, "nowhere.crt")} cannot be read: no such file` });
  const key = await importd(["jobs", "cancel", "1", "--base-url", `https://localhost:${port}/default`, "--api-key", "k_1", "--ca-file", join(dataDir, "tls", "importd.key")]);
  expect(key.code).toBe(2);
  expect(key.stderr).toContain("holds no PEM certificate");
});
