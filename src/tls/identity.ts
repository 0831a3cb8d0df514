// The server's TLS identity: its certificate (the chain after it) and private key, read from PEM files and checked
// before they are served, so that a bad file is one clear line at start-up, or a warning at a reload that keeps the
// certificate in use.
import { createPrivateKey, X509Certificate, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { userInfo } from "node:os";
import { ConfigError } from "../config";

/** A certificate or key that cannot be served: what is wrong with it, in one line (a configuration mistake). */
export class TlsError extends ConfigError {}

export type TlsIdentity = {
  /** The certificate, its chain after it (PEM). */
  cert: string;
  key: string;
  /** The certificate's SHA-256 fingerprint as OpenSSL, curl and browsers show it (AB:CD:…). */
  fingerprint: string;
  serial: string;
  validFrom: Date;
  validTo: Date;
  /** The names and addresses the certificate is for, as its subjectAltName lists them. */
  names: string;
  leaf: X509Certificate;
};

function readPem(path: string, what: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === "ENOENT") throw new TlsError(`the TLS ${what} ${path} does not exist`);
    if (code === "EACCES") throw new TlsError(`the TLS ${what} ${path} cannot be read by the user ${userInfo().username}: give that user read access`);
    if (code === "EISDIR") throw new TlsError(`the TLS ${what} ${path} is a directory, not a file`);
    throw new TlsError(`the TLS ${what} ${path} cannot be read: ${(error as Error).message}`);
  }
}

const pemCertificates = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g;

/** The identity in `certPath` and `keyPath`, checked: both PEM, the key unencrypted and the certificate's own. */
export function readIdentity(certPath: string, keyPath: string): TlsIdentity {
  const cert = readPem(certPath, "certificate");
  const key = readPem(keyPath, "key");
  const blocks = cert.match(pemCertificates);
  if (!blocks) throw new TlsError(`the TLS certificate ${certPath} is not a PEM certificate (it has no "-----BEGIN CERTIFICATE-----" block)`);
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(blocks[0]!);
    for (const block of blocks.slice(1)) new X509Certificate(block);
  } catch (error) {
    throw new TlsError(`the TLS certificate ${certPath} cannot be read as a certificate: ${(error as Error).message}`);
  }
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(key)) throw new TlsError(`the TLS key ${keyPath} is not a PEM private key (it has no "-----BEGIN … PRIVATE KEY-----" block)`);
  if (/-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/.test(key)) {
    throw new TlsError(`the TLS key ${keyPath} is encrypted with a passphrase, which importd cannot ask for: store it unencrypted, readable only by importd's user (openssl pkey -in ${keyPath} -out <new file>)`);
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(key);
  } catch (error) {
    throw new TlsError(`the TLS key ${keyPath} cannot be read as a private key: ${(error as Error).message}`);
  }
  if (!leaf.checkPrivateKey(privateKey)) {
    throw new TlsError(`the TLS certificate ${certPath} and the key ${keyPath} do not match: the key is not the certificate's (the first certificate in the file must be the server's own)`);
  }
  return { cert, key, fingerprint: leaf.fingerprint256, serial: leaf.serialNumber, validFrom: new Date(leaf.validFrom), validTo: new Date(leaf.validTo), names: leaf.subjectAltName ?? leaf.subject, leaf };
}

/** Whether the certificate is for `name`, a host name or an address. */
export const certifies = (identity: TlsIdentity, name: string) =>
  isIP(name) ? identity.leaf.checkIP(name) !== undefined : identity.leaf.checkHost(name) !== undefined;

/** What clients would refuse in the certificate: expired or not yet valid, or not for the host they reach it by. */
export function identityWarnings(identity: TlsIdentity, hosts: readonly string[], now = new Date()): string[] {
  const warnings: string[] = [];
  if (identity.validTo < now) warnings.push(`the TLS certificate expired on ${identity.validTo.toISOString()}: clients refuse it. Renew it; importd serves the new files without a restart`);
  if (identity.validFrom > now) warnings.push(`the TLS certificate is valid only from ${identity.validFrom.toISOString()}: clients refuse it until then (is this machine's clock right?)`);
  const unnamed = hosts.filter((host) => !certifies(identity, host));
  if (unnamed.length > 0) warnings.push(`the TLS certificate is not for ${unnamed.join(", ")} (it names ${identity.names}): clients that connect by ${unnamed.length === 1 ? "that name" : "those names"} refuse it`);
  return warnings;
}

/** The SHA-256 fingerprint of the (first) certificate in `path`: for clients to check the one they are shown. */
export function certificateFingerprint(path: string): string {
  const block = readPem(path, "certificate").match(pemCertificates)?.[0];
  if (!block) throw new TlsError(`the TLS certificate ${path} is not a PEM certificate (it has no "-----BEGIN CERTIFICATE-----" block)`);
  return new X509Certificate(block).fingerprint256;
}
