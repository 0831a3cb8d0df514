// The certificate a TLS server serves, from its start to its stop: the operator's (checked before anything is opened)
// or the self-signed one, what clients would refuse in it, said as warnings, and renewed files served to new
// connections without a restart.
import { readFileSync } from "node:fs";
import type { Config } from "../config";
import type { Log } from "../log";
import { certifies, identityWarnings, readIdentity, type TlsIdentity } from "./identity";
import { selfSignedFiles, selfSignedIdentity } from "./self-signed";
import { expectedNames, serverNames, type Transport } from "./transport";
import { watchFiles } from "./watch";

/** The certificate a TLS server serves, for the operator: where it is, and its fingerprint. */
export type ServedCertificate = { path: string; fingerprint: string; validTo: Date; names: string; selfSigned: boolean; createdNow: boolean };

type TlsTransport = Extract<Transport, { tls: true }>;

/** Where a renewed identity is served: the listener. */
type Reloadable = { reload(identity: TlsIdentity): void };

const readFileOr = (path: string, otherwise: string) => {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return otherwise;
  }
};

/** The operator's certificate and key (--tls-cert, --tls-key), checked; none when importd makes its own, or for plain HTTP. */
export const operatorIdentity = (transport: Transport): TlsIdentity | undefined =>
  transport.tls && transport.files ? readIdentity(transport.files.cert, transport.files.key) : undefined;

/** Plain HTTP where other machines can reach it: said once at the start, as the flag that allows it is easy to forget. */
export function warnIfPlainAndExposed(config: Pick<Config, "host">, transport: Transport, log: Log): void {
  if (!transport.tls && transport.exposed) {
    log({ level: "warn", msg: `plain HTTP on ${config.host}, an address other machines can reach (--insecure-http): API keys and data cross the network unencrypted. Serve HTTPS instead (leave out --insecure-http), or only behind a TLS proxy on a network you trust` });
  }
}

/** A TLS server's identity from its start to its stop: the one served now, and where renewed files come from. */
export class ServingIdentity {
  private constructor(
    private readonly config: Pick<Config, "host" | "tlsSan" | "dataDir">,
    private readonly transport: TlsTransport,
    private readonly log: Log,
    private readonly selfSigned: { created: boolean } | undefined,
    private current: TlsIdentity,
  ) {}

  /**
   * The identity to serve over `transport`: `given` (operatorIdentity's), or the self-signed one, made now if there is
   * none yet. Made only once the data directory is this process's (on SQLite), so that two starts never make two.
   * What clients would refuse in it is logged as warnings.
   */
  static async start(config: Pick<Config, "host" | "tlsSan" | "dataDir">, transport: TlsTransport, given: TlsIdentity | undefined, log: Log): Promise<ServingIdentity> {
    const selfSigned = given ? undefined : await selfSignedIdentity(config.dataDir, serverNames(config.host, config.tlsSan));
    const serving = new ServingIdentity(config, transport, log, selfSigned && { created: selfSigned.created }, given ?? selfSigned!.identity);
    serving.warnAbout(serving.current);
    if (selfSigned && !selfSigned.created) {
      const unnamed = config.tlsSan.filter((name) => !certifies(selfSigned.identity, name));
      if (unnamed.length > 0) log({ level: "warn", msg: `the self-signed certificate made at the first start does not name ${unnamed.join(", ")} (--tls-san): delete ${selfSignedFiles(config.dataDir).dir} to have a new one made (clients then trust its new fingerprint)` });
    }
    // Only the operator's certificate is renewed as a matter of course (the self-signed one, at a SIGHUP only).
    if (transport.files && readFileOr("/proc/sys/net/ipv4/tcp_migrate_req", "1").trim() === "0") {
      log({ level: "warn", msg: "net.ipv4.tcp_migrate_req is 0: when a renewed certificate is served, a connection that arrives in that very instant may be reset (the client sees ECONNRESET). Set it to 1 (sysctl -w net.ipv4.tcp_migrate_req=1, or deploy/importd-sysctl.conf) and Linux hands such connections to the new listener" });
    }
    return serving;
  }

  /** The identity served to new connections now. */
  get identity(): TlsIdentity {
    return this.current;
  }

  private get files(): { cert: string; key: string } {
    return this.transport.files ?? selfSignedFiles(this.config.dataDir);
  }

  /** The certificate served now, as the start reports it to the operator. */
  certificate(): ServedCertificate {
    return {
      path: this.files.cert,
      fingerprint: this.current.fingerprint,
      validTo: this.current.validTo,
      names: this.current.names,
      selfSigned: this.selfSigned !== undefined,
      createdNow: this.selfSigned?.created ?? false,
    };
  }

  /**
   * Reads the certificate and key again and serves them to new connections through `listener`, if they are new.
   * Files that are not good yet (a key written before its certificate, say) keep the certificate in use, with a warning.
   * `trigger`: a SIGHUP is always answered by a line, so that whoever sent it knows it arrived; a file watched that
   * changed without a new certificate in it (a touch, a key written first) is not worth one.
   */
  reload(listener: Reloadable, trigger: "SIGHUP" | "files changed"): void {
    const certificate = this.files.cert;
    try {
      const renewed = readIdentity(this.files.cert, this.files.key);
      if (renewed.fingerprint === this.current.fingerprint) {
        if (trigger === "SIGHUP") {
          this.log({ msg: "SIGHUP: read the TLS certificate and key again; unchanged, still serving the same certificate", certificate, key: this.files.key, fingerprint: renewed.fingerprint, validTo: renewed.validTo.toISOString() });
        }
        return;
      }
      listener.reload(renewed);
      this.current = renewed;
      this.log({ msg: "serving a renewed TLS certificate to new connections", certificate, serial: renewed.serial, fingerprint: renewed.fingerprint, validTo: renewed.validTo.toISOString(), trigger });
      this.warnAbout(renewed);
    } catch (error) {
      this.log({ level: "warn", msg: `kept the TLS certificate in use: ${(error as Error).message}`, certificate, trigger });
    }
  }

  /** Calls `changed` when the operator's files are renewed; the self-signed ones are not watched. Answers a function that stops. */
  watch(changed: () => void): () => void {
    return this.transport.files ? watchFiles([this.transport.files.cert, this.transport.files.key], changed) : () => {};
  }

  private warnAbout(served: TlsIdentity): void {
    // --tls-san's names are checked here in the operator's certificate only: the self-signed one names them when it
    // is made, and one made at an earlier start without them is said once, by start, with how to have a new one made.
    const hosts = [...expectedNames(this.config.host), ...(this.selfSigned ? [] : this.config.tlsSan)];
    for (const warning of identityWarnings(served, hosts)) this.log({ level: "warn", msg: warning, certificate: this.files.cert });
  }
}
