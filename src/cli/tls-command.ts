import type { Config } from "../config";
import { certificateFingerprint, TlsError } from "../tls/identity";
import { selfSignedFiles } from "../tls/self-signed";
import { UsageError, type Output } from "./errors";

/**
 * `importd tls fingerprint`: the SHA-256 fingerprint of the certificate the server serves (--tls-cert, or the
 * self-signed one in --data-dir), alone on stdout, for clients to check the one they are shown against.
 */
export function tlsCommand(config: Config, args: string[], io: Output): void {
  const [action, ...rest] = args;
  if (action !== "fingerprint") throw new UsageError(`unknown tls command '${action ?? ""}': use tls fingerprint`);
  if (rest.length > 0) throw new UsageError(`tls fingerprint takes no arguments, got '${rest.join(" ")}'`);
  const path = config.tlsCert ?? selfSignedFiles(config.dataDir).cert;
  try {
    io.out(certificateFingerprint(path));
  } catch (error) {
    if (error instanceof TlsError && !config.tlsCert && /does not exist/.test(error.message)) {
      throw new TlsError(`there is no certificate in ${config.dataDir} yet: importd makes one at its first start on an address other than loopback (or give --tls-cert)`);
    }
    throw error;
  }
  io.err(`SHA-256 fingerprint of ${path}`);
}
