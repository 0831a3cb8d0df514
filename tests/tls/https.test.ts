import { afterAll, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { mkdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { importd, spawnServer, type ServerProcess } from "../helpers/process";
import { tempDir } from "../helpers/server";
import { servedSerial } from "../helpers/tls";

// HTTPS from importd itself (DECISIONS 9): plain HTTP on loopback, HTTPS on any other address with a certificate it
// makes once in its data directory, plain HTTP there only with --insecure-http. Checked with curl and openssl, as an
// operator would.

const servers: ServerProcess[] = [];
const dirs: string[] = [];
afterAll(() => {
  for (const server of servers) server.proc.kill("SIGKILL");
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
const dir = (prefix: string) => {
  const path = tempDir(prefix);
  dirs.push(path);
  return path;
};
async function serve(dataDir: string, args: string[]) {
  const server = await spawnServer(dataDir, args);
  servers.push(server);
  return server;
}
async function stop(server: ServerProcess) {
  server.proc.kill("SIGTERM");
  expect(await server.proc.exited).toBe(0);
}
const run = (command: string[]) => {
  const result = Bun.spawnSync(command, { stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
};
const portOf = (url: string) => Number(new URL(url).port);

test("on an address other than loopback: HTTPS with a self-signed certificate made once (its key 0600), its fingerprint shown once and by `importd tls fingerprint`; curl and openssl trust it by its file", async () => {
  const dataDir = dir("importd-tls-self-");
  const first = await serve(dataDir, ["--host", "0.0.0.0", "--tls-san", "importd.example,10.9.8.7"]);
  const out = first.stdout.join("\n");
  expect(first.url).toStartWith("https://");
  expect(out).toMatch(/listening on https:\/\/\S+ \(HTTPS on every IPv4 address of this machine \(IPv6 too: --host ::\), certificate \S+importd\.crt;/);
  const certificate = join(dataDir, "tls", "importd.crt");
  const key = join(dataDir, "tls", "importd.key");
  expect(statSync(key).mode & 0o777).toBe(0o600);
  expect(statSync(join(dataDir, "tls")).mode & 0o777).toBe(0o700);
  const made = new X509Certificate(readFileSync(certificate));
  for (const name of [`DNS:${hostname()}`, "DNS:localhost", "IP Address:127.0.0.1", "DNS:importd.example", "IP Address:10.9.8.7"]) expect(made.subjectAltName).toContain(name);
  // 0.0.0.0 is IPv4 only: the certificate does not name ::1, where nothing answers, and the listening line says so.
  expect(made.subjectAltName).not.toContain("IP Address:0:0:0:0:0:0:0:1");
  expect(out).toContain("Made a self-signed TLS certificate");
  expect(out).toContain(made.fingerprint256);

  const fingerprint = await importd(["tls", "fingerprint", "--data-dir", dataDir]);
  expect({ code: fingerprint.code, stdout: fingerprint.stdout.trim() }).toEqual({ code: 0, stdout: made.fingerprint256 });

  const port = portOf(first.url);
  const curl = run(["curl", "-sS", "--cacert", certificate, `https://localhost:${port}/healthz`]);
  expect(curl).toMatchObject({ code: 0, stdout: '{"status":"ok"}' });
  const untrusted = run(["curl", "-sS", `https://localhost:${port}/healthz`]);
  expect(untrusted.code).toBe(60);
  const verified = run(["sh", "-c", `echo | openssl s_client -connect 127.0.0.1:${port} -servername localhost -verify_hostname localhost -CAfile ${certificate} -brief`]);
  expect(verified.stderr).toContain("Verification: OK");
  expect(verified.stderr).toMatch(/Protocol version: TLSv1\.[23]/);
  await stop(first);

  // Made once: the second start serves the same certificate, and says nothing of it.
  const second = await serve(dataDir, ["--host", "0.0.0.0"]);
  expect(second.stdout.join("\n")).not.toContain("Made a self-signed TLS certificate");
  expect(new X509Certificate(readFileSync(certificate)).fingerprint256).toBe(made.fingerprint256);
  expect(await servedSerial(portOf(second.url))).toBe(made.serialNumber);
  await stop(second);
}, 60_000);

test("--host :: serves HTTPS on IPv6 and, where Linux maps IPv4 to it (net.ipv6.bindv6only 0, the default), on IPv4 too: the certificate names both loopbacks, and the listening line says which", async () => {
  const dataDir = dir("importd-tls-dual-");
  const server = await serve(dataDir, ["--host", "::"]);
  const out = server.stdout.join("\n");
  const port = portOf(server.url);
  const certificate = join(dataDir, "tls", "importd.crt");
  const made = new X509Certificate(readFileSync(certificate));
  expect(made.subjectAltName).toContain("IP Address:0:0:0:0:0:0:0:1");
  const curl = (host: string) => run(["curl", "-sS", "--cacert", certificate, `https://${host}:${port}/healthz`]);
  expect(curl("[::1]")).toMatchObject({ code: 0, stdout: '{"status":"ok"}' });
  if ((await Bun.file("/proc/sys/net/ipv6/bindv6only").text()).trim() === "0") {
    expect(out).toContain("(HTTPS on every IPv4 and IPv6 address of this machine, certificate ");
    expect(made.subjectAltName).toContain("IP Address:127.0.0.1");
    expect(curl("127.0.0.1")).toMatchObject({ code: 0, stdout: '{"status":"ok"}' });
  } else {
    expect(out).toContain("(HTTPS on every IPv6 address of this machine (net.ipv6.bindv6only is 1), certificate ");
  }
  await stop(server);
}, 30_000);

test("TLS 1.2 or later only: TLS 1.1 and 1.0 are refused, 1.2 and 1.3 served", async () => {
  const server = await serve(dir("importd-tls-versions-"), ["--host", "0.0.0.0"]);
  const port = portOf(server.url);
  const handshake = (version: string) => run(["sh", "-c", `echo | openssl s_client -connect 127.0.0.1:${port} -${version} -cipher 'DEFAULT@SECLEVEL=0' 2>&1`]).stdout;
  for (const refused of ["tls1", "tls1_1"]) expect(handshake(refused)).toMatch(/alert protocol version|no protocols available/);
  expect(handshake("tls1_2")).toContain("New, TLSv1.2,");
  expect(handshake("tls1_3")).toContain("New, TLSv1.3,");
  await stop(server);
}, 30_000);

test("plain HTTP on loopback by default, as the quick start has it; on another address only with --insecure-http, which the listening line and a warning say", async () => {
  const loopback = await serve(dir("importd-tls-plain-"), []);
  expect(loopback.url).toStartWith("http://127.0.0.1:");
  expect(loopback.stdout.join("\n")).toContain("(plain HTTP, this machine only;");
  expect((await fetch(`${loopback.url}/healthz`)).status).toBe(200);
  await stop(loopback);

  const exposed = await serve(dir("importd-tls-insecure-"), ["--host", "0.0.0.0", "--insecure-http"]);
  expect(exposed.url).toStartWith("http://");
  expect(exposed.stdout.join("\n")).toContain("(plain HTTP on the network: --insecure-http;");
  expect((await fetch(`${exposed.url}/healthz`)).status).toBe(200);
  exposed.proc.kill("SIGTERM");
  await exposed.proc.exited;
  expect(await exposed.stderr).toContain("API keys and data cross the network unencrypted");
}, 30_000);

test("`importd tls fingerprint` before any certificate was made says so, in one line", async () => {
  const result = await importd(["tls", "fingerprint", "--data-dir", dir("importd-tls-none-")]);
  expect(result.code).toBe(2);
  expect(result.stderr.trim()).toMatch(/^importd: there is no certificate in \S+ yet: importd makes one at its first start on an address other than loopback/);
});
