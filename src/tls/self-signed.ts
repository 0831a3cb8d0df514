// The certificate importd makes for itself (DECISIONS 9: no certificate work needed): at its first start over TLS
// without --tls-cert, a self-signed certificate and key in the data directory, reused at every start after. Clients
// trust it by that very file (curl --cacert, importd import --ca-file).
import { chmodSync, existsSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import { join } from "node:path";
import { fileMode, privateDirectory } from "../store/data-directory";
import { readIdentity, type TlsIdentity } from "./identity";

/** Where the self-signed certificate and its key are kept. */
export const selfSignedFiles = (dataDir: string) => {
  const dir = join(dataDir, "tls");
  return { dir, cert: join(dir, "importd.crt"), key: join(dir, "importd.key") };
};

// ECDSA P-256: every TLS client has it, and the key is made at once. 825 days, the longest validity Apple's
// platforms still accept for a certificate they are told to trust.
const algorithm = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const validDays = 825;

/**
 * The self-signed identity in `dataDir`: made now, naming `names` (host names and addresses), if there is none yet
 * (`created`); otherwise the one made before, as it is.
 */
export async function selfSignedIdentity(dataDir: string, names: readonly string[]): Promise<{ identity: TlsIdentity; created: boolean }> {
  const files = selfSignedFiles(dataDir);
  if (existsSync(files.cert) && existsSync(files.key)) return { identity: readIdentity(files.cert, files.key), created: false };
  const { cert, key } = await makeSelfSigned(names);
  privateDirectory(dataDir);
  privateDirectory(files.dir);
  // The key first, readable by this user only (the mode again: umask may have taken bits away, never added them).
  // The certificate too, as everything in the data directory: clients are given a copy, or its fingerprint.
  writeFileSync(files.key, key, { mode: fileMode });
  chmodSync(files.key, fileMode);
  writeFileSync(files.cert, cert, { mode: fileMode });
  return { identity: readIdentity(files.cert, files.key), created: true };
}

async function makeSelfSigned(names: readonly string[]): Promise<{ cert: string; key: string }> {
  // Loaded only here: the X.509 library needs the Reflect metadata polyfill, and nothing else in importd does.
  await import("reflect-metadata");
  const x509 = await import("@peculiar/x509");
  const keys = await crypto.subtle.generateKey(algorithm, true, ["sign", "verify"]);
  const now = Date.now();
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    // Positive, 128 random bits: unique without a register of issued serials.
    serialNumber: `01${Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("hex")}`,
    name: `CN=importd ${names[0] ?? "localhost"}`,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + validDays * 86_400_000),
    signingAlgorithm: algorithm,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(names.map((name) => ({ type: isIP(name) ? ("ip" as const) : ("dns" as const), value: name }))),
    ],
  });
  const pkcs8 = Buffer.from(await crypto.subtle.exportKey("pkcs8", keys.privateKey)).toString("base64");
  const key = `-----BEGIN PRIVATE KEY-----\n${pkcs8.match(/.{1,64}/g)!.join("\n")}\n-----END PRIVATE KEY-----\n`;
  return { cert: certificate.toString("pem") + "\n", key };
}
