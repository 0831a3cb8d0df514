import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { writeFileSync } from "node:fs";
import { connect } from "node:tls";
import { join } from "node:path";

/**
 * A certificate authority of the tests' own, and server certificates it signs: what an operator brings with
 * --tls-cert (a chain after the server's certificate), and what clients trust with --ca-file (the authority).
 */
const algorithm = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const day = 86_400_000;

const pemKey = async (key: CryptoKey) =>
  `-----BEGIN PRIVATE KEY-----\n${Buffer.from(await crypto.subtle.exportKey("pkcs8", key)).toString("base64").match(/.{1,64}/g)!.join("\n")}\n-----END PRIVATE KEY-----\n`;
const serial = () => `01${Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex")}`;

export type Issued = { cert: string; key: string; serial: string; fingerprint: string };
export type TestAuthority = {
  cert: string;
  /** A server certificate for `names`, valid from `from` until `until` (default: yesterday to in a year). */
  issue(names: string[], validity?: { from?: Date; until?: Date }): Promise<Issued>;
};

export async function testAuthority(name = "importd tests"): Promise<TestAuthority> {
  const keys = await crypto.subtle.generateKey(algorithm, true, ["sign", "verify"]);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${name} CA`,
    notBefore: new Date(Date.now() - day),
    notAfter: new Date(Date.now() + 365 * day),
    signingAlgorithm: algorithm,
    keys,
    extensions: [new x509.BasicConstraintsExtension(true, undefined, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true)],
  });
  return {
    cert: ca.toString("pem") + "\n",
    async issue(names, { from = new Date(Date.now() - day), until = new Date(Date.now() + 365 * day) } = {}) {
      const leafKeys = await crypto.subtle.generateKey(algorithm, true, ["sign", "verify"]);
      const leaf = await x509.X509CertificateGenerator.create({
        serialNumber: serial(),
        subject: `CN=${names[0]}`,
        issuer: ca.subject,
        notBefore: from,
        notAfter: until,
        signingAlgorithm: algorithm,
        publicKey: leafKeys.publicKey,
        signingKey: keys.privateKey,
        extensions: [
          new x509.BasicConstraintsExtension(false, undefined, true),
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
          new x509.SubjectAlternativeNameExtension(names.map((value) => ({ type: /^[\d.]+$|:/.test(value) ? ("ip" as const) : ("dns" as const), value }))),
        ],
      });
      const cert = `${leaf.toString("pem")}\n${ca.toString("pem")}\n`;
      const parsed = new X509Certificate(leaf.toString("pem"));
      return { cert, key: await pemKey(leafKeys.privateKey), serial: parsed.serialNumber, fingerprint: parsed.fingerprint256 };
    },
  };
}

/** Writes `issued` as cert.pem and key.pem in `dir` (the key 0600); answers their paths. */
export function writeIdentity(dir: string, issued: Pick<Issued, "cert" | "key">, name = "server"): { cert: string; key: string } {
  const files = { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
  writeFileSync(files.cert, issued.cert);
  writeFileSync(files.key, issued.key, { mode: 0o600 });
  return files;
}

/** The same key, encrypted with a passphrase (as `openssl pkey -aes256` writes it). */
export const encryptedKey = (key: string) => createPrivateKey(key).export({ type: "pkcs8", format: "pem", cipher: "aes-256-cbc", passphrase: "secret" }) as string;

/** The serial number of the certificate a TLS server at `port` shows a new connection. */
export function shownSerial(port: number, host = "127.0.0.1"): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, rejectUnauthorized: false }, () => {
      const serial = socket.getPeerCertificate().serialNumber;
      socket.destroy();
      resolve(serial);
    });
    socket.on("error", reject);
  });
}

/**
 * As shownSerial, as a client that retries would see it: a connection that arrives in the very instant a renewed
 * certificate's listener takes over may be reset by Linux unless net.ipv4.tcp_migrate_req is 1 (README, "HTTPS").
 */
export async function servedSerial(port: number, host = "127.0.0.1"): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await shownSerial(port, host);
    } catch (error) {
      if ((error as { code?: string }).code !== "ECONNRESET" || attempt === 3) throw error;
    }
  }
}
