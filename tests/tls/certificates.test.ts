import { afterAll, beforeAll, expect, test } from "bun:test";
import { chmodSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { waitForJob } from "../helpers/api";
import { assetCategories, assets, assetTypes, subAreas } from "../helpers/records";
import { importd, projectRoot, spawnServer, type ServerProcess, importdCommand } from "../helpers/process";
import { enqueueJob, tempDir } from "../helpers/server";
import { until } from "../helpers/until";
import { SqliteStore } from "../../src/store/sqlite/store";
import { outboxRows } from "../../src/webhooks/outbox";
import { encryptedKey, servedSerial, shownSerial, testAuthority, writeIdentity, type TestAuthority } from "../helpers/tls";

// The operator's own certificate (--tls-cert, --tls-key): served on any address, loopback included; every problem
// with the files one line at start-up; renewed files served to new connections without a restart, while what is in
// flight on the old ones finishes.

let authority: TestAuthority;
const dirs: string[] = [];
const servers: ServerProcess[] = [];
beforeAll(async () => {
  authority = await testAuthority();
});
afterAll(() => {
  for (const server of servers) server.proc.kill("SIGKILL");
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
const dir = (prefix: string) => {
  const path = tempDir(prefix);
  dirs.push(path);
  return path;
};

/** Calls the API of `server` over TLS, trusting `ca`, with the server's first key. */
function caller(server: ServerProcess, ca: string) {
  return (path: string, init: RequestInit = {}) =>
    fetch(`${server.url}/default${path}`, { ...init, headers: { "api-key": server.firstRunKey!, "content-type": "application/json", ...init.headers }, tls: { ca } } as RequestInit);
}

async function startRefused(args: string[]) {
  const result = await importd(["serve", "--port", "0", "--data-dir", dir("importd-tls-refused-"), ...args]);
  return { code: result.code, stderr: result.stderr.trim() };
}

test("a certificate and key that cannot be served are refused at start-up, each with one line and exit code 2, never a stack trace", async () => {
  const files = dir("importd-tls-bad-");
  const good = writeIdentity(files, await authority.issue(["localhost", "127.0.0.1"]));
  const other = writeIdentity(files, await authority.issue(["localhost"]), "other");
  const encrypted = join(files, "encrypted.key");
  writeFileSync(encrypted, encryptedKey(await Bun.file(good.key).text()));
  const notPem = join(files, "not-pem.crt");
  writeFileSync(notPem, "this is not a certificate\n");
  const garbledPem = join(files, "garbled.crt");
  writeFileSync(garbledPem, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
  const cases: Array<[string, string[], RegExp]> = [
    ["a missing certificate", ["--tls-cert", join(files, "nowhere.crt"), "--tls-key", good.key], /^importd: the TLS certificate \S+nowhere\.crt does not exist$/],
    ["a missing key", ["--tls-cert", good.cert, "--tls-key", join(files, "nowhere.key")], /^importd: the TLS key \S+nowhere\.key does not exist$/],
    ["a key that is a directory", ["--tls-cert", good.cert, "--tls-key", files], /^importd: the TLS key \S+ is a directory, not a file$/],
    ["an encrypted key", ["--tls-cert", good.cert, "--tls-key", encrypted], /^importd: the TLS key \S+encrypted\.key is encrypted with a passphrase, which importd cannot ask for: store it unencrypted/],
    ["a key of another certificate", ["--tls-cert", good.cert, "--tls-key", other.key], /^importd: the TLS certificate \S+ and the key \S+other\.key do not match/],
    ["a certificate that is not PEM", ["--tls-cert", notPem, "--tls-key", good.key], /^importd: the TLS certificate \S+not-pem\.crt is not a PEM certificate/],
    ["a PEM block that is no certificate", ["--tls-cert", garbledPem, "--tls-key", good.key], /^importd: the TLS certificate \S+garbled\.crt cannot be read as a certificate/],
    ["a key that is not PEM", ["--tls-cert", good.cert, "--tls-key", notPem], /^importd: the TLS key \S+not-pem\.crt is not a PEM private key/],
    ["a certificate without its key", ["--tls-cert", good.cert], /^importd: --tls-cert and --tls-key go together/],
  ];
  for (const [name, args, line] of cases) {
    const { code, stderr } = await startRefused(args);
    expect({ name, code, lines: stderr.split("\n").length }).toEqual({ name, code: 2, lines: 1 });
    expect(stderr).toMatch(line);
  }

  // A key importd's user cannot read (as root, which reads anything, the server runs as nobody for this).
  const unreadable = join(files, "unreadable.key");
  writeFileSync(unreadable, await Bun.file(good.key).text(), { mode: 0o600 });
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    chmodSync(files, 0o755);
    for (const path of [good.cert]) chmodSync(path, 0o644);
  } else chmodSync(unreadable, 0o000);
  const dataDir = dir("importd-tls-nobody-");
  chmodSync(dataDir, 0o777);
  const command = [...(asRoot ? ["runuser", "-u", "nobody", "--"] : []), ...importdCommand, "serve", "--port", "0", "--data-dir", dataDir, "--tls-cert", good.cert, "--tls-key", unreadable];
  const denied = Bun.spawnSync(command, { cwd: projectRoot, stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH!, HOME: dataDir } });
  expect(denied.exitCode).toBe(2);
  expect(denied.stderr.toString().trim()).toMatch(/^importd: the TLS key \S+unreadable\.key cannot be read by the user \S+: give that user read access$/);
}, 60_000);

test("an expired certificate, and one that does not name the host, are served with a warning", async () => {
  const files = dir("importd-tls-warn-");
  const expired = writeIdentity(files, await authority.issue(["localhost", "127.0.0.1"], { from: new Date(Date.now() - 3 * 86_400_000), until: new Date(Date.now() - 86_400_000) }), "expired");
  const elsewhere = writeIdentity(files, await authority.issue(["elsewhere.example"]), "elsewhere");
  for (const [files, warning] of [
    [expired, /the TLS certificate expired on \S+: clients refuse it/],
    [elsewhere, /the TLS certificate is not for 127\.0\.0\.1 \(it names DNS:elsewhere\.example\)/],
  ] as const) {
    const server = await spawnServer(dir("importd-tls-warned-"), ["--tls-cert", files.cert, "--tls-key", files.key]);
    servers.push(server);
    expect(server.url).toStartWith("https://127.0.0.1:");
    server.proc.kill("SIGTERM");
    expect(await server.proc.exited).toBe(0);
    expect(await server.stderr).toMatch(warning);
  }
}, 30_000);

test("renewed certificate files are served to new connections without a restart, while a held long poll and an upload in progress finish on the connections they began on", async () => {
  const files = dir("importd-tls-renew-");
  const first = await authority.issue(["localhost", "127.0.0.1"]);
  const renewed = await authority.issue(["localhost", "127.0.0.1"]);
  const paths = writeIdentity(files, first);
  const serverDataDir = dir("importd-tls-renew-data-");
  const server = await spawnServer(serverDataDir, ["--tls-cert", paths.cert, "--tls-key", paths.key]);
  servers.push(server);
  const port = Number(new URL(server.url).port);
  const call = caller(server, authority.cert);
  for (const [resource, records] of [["subareas", subAreas], ["assettypes", assetTypes], ["assetcategories", assetCategories]] as const) {
    const accepted = await call(`/v2/${resource}`, { method: "POST", body: JSON.stringify(records) });
    expect(accepted.status).toBe(202);
    // Ended before the job below is parked: a run still going would go on to it, and answer the held poll early.
    await waitForJob(`${server.url}/default`, server.firstRunKey!, ((await accepted.json()) as { id: number }).id, 30_000, { tls: { ca: authority.cert } });
  }
  expect(await servedSerial(port)).toBe(first.serial);

  // In flight on connections made before the renewal, both held by the test (not by how long some work takes, which a
  // faster machine shortens): a long poll on a job put straight into the queue, which nothing wakes until the upload
  // arrives (as tests/helpers/server.ts's parkJob does), and an upload whose last bytes wait for the test's word.
  const store = SqliteStore.open(serverDataDir, { outbox: outboxRows });
  const environmentId = (await store.access.findEnvironment("default"))!.id;
  const parked = await enqueueJob(store.queue, environmentId, "Asset", 1, new TextEncoder().encode(JSON.stringify(assets(1, 300_000))));
  await store.close();
  const heldPoll = call(`/v2/status/${parked.id}`, { headers: { prefer: "wait=30" } });
  let pollAnswered = false;
  void heldPoll.then(() => (pollAnswered = true));
  const body = new TextEncoder().encode(JSON.stringify(assets(2_000, 100_000)));
  let finishUpload!: () => void;
  const uploadMayEnd = new Promise<void>((resolve) => (finishUpload = resolve));
  const slowly = new ReadableStream<Uint8Array>({
    async start(controller) {
      for (let at = 0; at < body.length - 2_000; at += 2_000) controller.enqueue(body.slice(at, Math.min(at + 2_000, body.length - 2_000)));
      await uploadMayEnd;
      controller.enqueue(body.slice(body.length - 2_000));
      controller.close();
    },
  });
  const upload = call("/v2/assets", { method: "POST", body: slowly, duplex: "half" } as RequestInit);
  let uploadAnswered = false;
  void upload.then(() => (uploadAnswered = true));
  const metrics = async () => (await fetch(`${server.url}/metrics`, { tls: { ca: authority.cert } } as RequestInit)).text();
  await until(async () => /^importd_held_polls 1$/m.test(await metrics()), { what: "the poll held by the server" });

  // The renewal tools' way: the new files written beside, then moved into place.
  writeIdentity(files, renewed, "next");
  renameSync(join(files, "next.key"), paths.key);
  renameSync(join(files, "next.crt"), paths.cert);
  const deadline = Date.now() + 5_000;
  while ((await servedSerial(port)) !== renewed.serial) {
    if (Date.now() > deadline) throw new Error("the renewed certificate was not served within 5 s");
    await Bun.sleep(50);
  }
  for (let n = 0; n < 5; n++) expect(await servedSerial(port)).toBe(renewed.serial);
  // Both still under way when the renewed certificate was served.
  expect({ pollAnswered, uploadAnswered }).toEqual({ pollAnswered: false, uploadAnswered: false });
  // The upload ends; its job wakes the queue, which runs the parked job first, and the poll is answered.
  finishUpload();

  const uploaded = await upload;
  expect(uploaded.status).toBe(202);
  const polled = await heldPoll;
  expect(polled.status).toBe(200);
  expect(((await polled.json()) as { importJobStatus: string }).importJobStatus).toBe("Succeeded");

  server.proc.kill("SIGTERM");
  expect(await server.proc.exited).toBe(0);
  const log = await server.stderr;
  expect(log).toContain("serving a renewed TLS certificate to new connections");
  // Told at start when a renewal could reset a connection (README, "HTTPS").
  const migrates = (await Bun.file("/proc/sys/net/ipv4/tcp_migrate_req").text()).trim() === "1";
  expect(log.includes("net.ipv4.tcp_migrate_req is 0")).toBe(!migrates);
}, 90_000);

test("SIGHUP reads the certificate again: the self-signed one replaced in the data directory (which nothing watches) is served after it", async () => {
  const dataDir = dir("importd-tls-hup-");
  const server = await spawnServer(dataDir, ["--host", "0.0.0.0"]);
  servers.push(server);
  const port = Number(new URL(server.url).port);
  const before = await servedSerial(port);
  const replacement = await authority.issue(["localhost", "127.0.0.1"]);
  writeIdentity(join(dataDir, "tls"), replacement, "importd");
  await Bun.sleep(1_000);
  expect(await servedSerial(port)).toBe(before);
  server.proc.kill("SIGHUP");
  const deadline = Date.now() + 5_000;
  while ((await servedSerial(port)) !== replacement.serial) {
    if (Date.now() > deadline) throw new Error("the certificate was not served after SIGHUP within 5 s");
    await Bun.sleep(50);
  }
  expect((await caller(server, authority.cert)("/v2/jobs")).status).toBe(200);
  server.proc.kill("SIGTERM");
  expect(await server.proc.exited).toBe(0);
}, 30_000);

test("SIGHUP with the certificate unchanged says so in one line: what was read, and that the same certificate is served", async () => {
  const dataDir = dir("importd-tls-hup-same-");
  const server = await spawnServer(dataDir, ["--host", "0.0.0.0"]);
  servers.push(server);
  const port = Number(new URL(server.url).port);
  const before = await servedSerial(port);
  server.proc.kill("SIGHUP");
  const line = await until(() => server.stderrLines.find((text) => text.includes('"msg":"SIGHUP: read the TLS certificate and key again; unchanged')), {
    holds: (found) => found !== undefined,
    what: "the log line answering the SIGHUP",
  });
  const said = JSON.parse(line!) as Record<string, string>;
  expect(said.certificate).toBe(join(dataDir, "tls", "importd.crt"));
  expect(said.key).toBe(join(dataDir, "tls", "importd.key"));
  expect(said.fingerprint).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
  expect(await servedSerial(port)).toBe(before);
  server.proc.kill("SIGTERM");
  expect(await server.proc.exited).toBe(0);
}, 30_000);

test("SIGHUP on a server of plain HTTP says there is no certificate to read again", async () => {
  const server = await spawnServer(dir("importd-hup-plain-"), []);
  servers.push(server);
  server.proc.kill("SIGHUP");
  await until(() => server.stderrLines.some((text) => text.includes('"msg":"SIGHUP: serving plain HTTP, there is no TLS certificate to read again"')), {
    holds: (found) => found,
    what: "the log line answering the SIGHUP",
  });
  server.proc.kill("SIGTERM");
  expect(await server.proc.exited).toBe(0);
}, 30_000);

// As deploy/importd-sysctl.conf sets it (the test sets it for its own run, which needs root, and puts it back).
// Linux still resets, rarely, a connection whose handshake completes in the same microseconds as the old listener
// closes (about one renewal in 200 with six clients connecting without pause, README "HTTPS"); with the setting at 0
// the same run resets about five connections at every renewal. So the test allows two resets in its four renewals.
test("with net.ipv4.tcp_migrate_req=1, connections made all the while across renewals are handed to the new listener: clients see the old certificate, then the new one, and all but a rare one connect", async () => {
  const setting = "/proc/sys/net/ipv4/tcp_migrate_req";
  const before = (await Bun.file(setting).text()).trim();
  try {
    writeFileSync(setting, "1");
  } catch (error) {
    throw new Error(`this test sets ${setting} and needs root: ${(error as Error).message}`);
  }
  try {
    const files = dir("importd-tls-migrate-");
    const identities = await Promise.all([0, 1, 2, 3, 4].map(() => authority.issue(["localhost", "127.0.0.1"])));
    const paths = writeIdentity(files, identities[0]!);
    const server = await spawnServer(dir("importd-tls-migrate-data-"), ["--tls-cert", paths.cert, "--tls-key", paths.key]);
    servers.push(server);
    const port = Number(new URL(server.url).port);
    let renewing = true;
    const seen = new Map<string, number>();
    const clients = Array.from({ length: 6 }, async () => {
      while (renewing) {
        const serial = await shownSerial(port).catch((error: { code?: string }) => `error ${error.code}`);
        seen.set(serial, (seen.get(serial) ?? 0) + 1);
      }
    });
    for (const identity of identities.slice(1)) {
      await Bun.sleep(100); // connections made on each listener, not only across the switch
      writeIdentity(files, identity);
      server.proc.kill("SIGHUP");
      const deadline = Date.now() + 5_000;
      while ((await servedSerial(port)) !== identity.serial) {
        if (Date.now() > deadline) throw new Error("a renewed certificate was not served within 5 s");
        await Bun.sleep(20);
      }
    }
    renewing = false;
    await Promise.all(clients);
    const { "error ECONNRESET": resets = 0, ...rest } = Object.fromEntries(seen);
    expect(Object.keys(rest).filter((outcome) => outcome.startsWith("error"))).toEqual([]);
    expect(Object.values(rest).reduce((sum, count) => sum + count, 0)).toBeGreaterThan(40);
    expect(resets).toBeLessThanOrEqual(2);
    expect([...seen.keys()].filter((serial) => identities.some((identity) => identity.serial === serial)).length).toBeGreaterThanOrEqual(4);
    server.proc.kill("SIGTERM");
    expect(await server.proc.exited).toBe(0);
  } finally {
    writeFileSync(setting, before);
  }
}, 60_000);

test("files that are not good yet at a renewal (a key written before its certificate) keep the certificate in use, with a warning", async () => {
  const files = dir("importd-tls-halfway-");
  const first = await authority.issue(["localhost", "127.0.0.1"]);
  const paths = writeIdentity(files, first);
  const server = await spawnServer(dir("importd-tls-halfway-data-"), ["--tls-cert", paths.cert, "--tls-key", paths.key]);
  servers.push(server);
  const port = Number(new URL(server.url).port);
  writeFileSync(paths.key, (await authority.issue(["localhost"])).key);
  await Bun.sleep(1_500);
  expect(await servedSerial(port)).toBe(first.serial);
  server.proc.kill("SIGTERM");
  expect(await server.proc.exited).toBe(0);
  expect(await server.stderr).toContain("kept the TLS certificate in use: the TLS certificate");
}, 30_000);
