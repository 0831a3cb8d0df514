import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../src/config";
import { startServer, type RunningServer } from "../../src/server";
import { tempDir } from "../helpers/server";
import { testAuthority, writeIdentity } from "../helpers/tls";

// TLS 1.2 with ECDHE and AEAD suites only (Mozilla's "intermediate", DECISIONS 15), whatever the operator's
// certificate: asked by openssl s_client for one suite at a time, as a scanner would.

const dir = tempDir("importd-ciphers-");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Whether a TLS 1.2 (or 1.3) handshake with `port` succeeds offering only `cipher`. */
async function handshake(port: number, version: "-tls1_2" | "-tls1_3", cipher?: string): Promise<{ ok: boolean; output: string }> {
  const args = ["openssl", "s_client", "-connect", `127.0.0.1:${port}`, version, "-servername", "localhost"];
  if (cipher) args.push(version === "-tls1_3" ? "-ciphersuites" : "-cipher", cipher);
  // Async: the server answers from this very process.
  const proc = Bun.spawn(args, { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  await proc.exited;
  const output = `${out}\n${err}`;
  return { ok: /^\s*Cipher is (?!\(NONE\))/m.test(output) || /New, TLSv1\.[23], Cipher is (?!\(NONE\))/.test(output), output };
}

async function rsaIdentity(): Promise<{ cert: string; key: string }> {
  const files = { cert: join(dir, "rsa.crt"), key: join(dir, "rsa.key") };
  const proc = Bun.spawn(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", files.key, "-out", files.cert, "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], { stdout: "ignore", stderr: "ignore" });
  expect(await proc.exited).toBe(0);
  return files;
}

const refused = ["AES128-SHA", "AES256-SHA", "AES128-GCM-SHA256", "AES256-GCM-SHA384", "ECDHE-RSA-AES128-SHA", "ECDHE-ECDSA-AES128-SHA", "ECDHE-RSA-AES256-SHA384", "ECDHE-ECDSA-AES256-SHA384", "DHE-RSA-AES128-GCM-SHA256"];

for (const kind of ["RSA", "ECDSA"] as const) {
  describe(`with an operator's ${kind} certificate`, () => {
    let server: RunningServer;
    let port: number;
    beforeAll(async () => {
      const files = kind === "RSA" ? await rsaIdentity() : writeIdentity(dir, await (await testAuthority("ciphers")).issue(["localhost", "127.0.0.1"]), "ecdsa");
      const config = { ...loadConfig({}, {}), port: 0, host: "127.0.0.1", workers: 1, dataDir: join(dir, kind), tlsCert: files.cert, tlsKey: files.key, databaseUrl: undefined };
      server = await startServer(Object.freeze(config), () => {});
      port = server.port;
    });
    afterAll(() => server.stop());

    test("TLS 1.2 refuses static-RSA, CBC and DHE suites", async () => {
      const accepted: string[] = [];
      for (const cipher of refused) if ((await handshake(port, "-tls1_2", cipher)).ok) accepted.push(cipher);
      expect(accepted).toEqual([]);
    }, 30_000);

    test("TLS 1.2 accepts ECDHE with AES-GCM and ChaCha20-Poly1305", async () => {
      for (const cipher of [`ECDHE-${kind}-AES128-GCM-SHA256`, `ECDHE-${kind}-AES256-GCM-SHA384`, `ECDHE-${kind}-CHACHA20-POLY1305`]) {
        const result = await handshake(port, "-tls1_2", cipher);
        expect({ cipher, ok: result.ok }).toEqual({ cipher, ok: true });
        expect(result.output).toContain(`Cipher is ${cipher}`);
      }
    }, 30_000);

    test("TLS 1.3 works", async () => {
      const result = await handshake(port, "-tls1_3");
      expect(result.ok).toBe(true);
      expect(result.output).toContain("TLSv1.3");
    }, 30_000);
  });
}
