import type { Server } from "bun";
import { constants } from "node:crypto";
import type { TlsIdentity } from "../tls/identity";

type ServeOptions = Parameters<typeof Bun.serve>[0] & { port: number; hostname: string };

// TLS 1.2 and later only. Bun refuses 1.0 and 1.1 by default too: this says so, and keeps it so if that changes.
const secureOptions = constants.SSL_OP_NO_TLSv1 | constants.SSL_OP_NO_TLSv1_1;

// TLS 1.2's suites as Mozilla's "intermediate" configuration has them, less its DHE ones: ECDHE key exchange
// (forward secrecy) with an AEAD cipher, for ECDSA and RSA certificates. Left to its defaults, an RSA certificate was
// also offered static-RSA key exchange and CBC suites. TLS 1.3's suites (all AEAD) are set apart, and stay as they are.
const ciphers = [
  "ECDHE-ECDSA-AES128-GCM-SHA256",
  "ECDHE-RSA-AES128-GCM-SHA256",
  "ECDHE-ECDSA-AES256-GCM-SHA384",
  "ECDHE-RSA-AES256-GCM-SHA384",
  "ECDHE-ECDSA-CHACHA20-POLY1305",
  "ECDHE-RSA-CHACHA20-POLY1305",
].join(":");

/**
 * Where importd listens: one Bun server, plain or TLS. Bun cannot change a listening server's certificate (its
 * reload() replaces the handlers only), so a renewed certificate is served by a new server on the same port
 * (SO_REUSEPORT), and the old one stops accepting connections but finishes the requests of those it has: held long
 * polls, uploads and their intakes end as usual, and new connections see the new certificate.
 */
export class Listener {
  private readonly draining = new Set<Server<undefined>>();

  private constructor(
    private readonly options: ServeOptions,
    private current: Server<undefined>,
  ) {}

  static open(options: ServeOptions, identity?: TlsIdentity): Listener {
    if (!identity) return new Listener(options, Bun.serve(options) as Server<undefined>);
    // With SO_REUSEPORT, a port another process holds (with it set too) would be shared, not refused: bound once
    // without it first, so that a busy port is an error as for plain HTTP (and port 0 a port of our own).
    const probe = Bun.serve({ ...options, fetch: () => new Response() });
    const fixed = { ...options, port: probe.port! };
    void probe.stop(true);
    return new Listener(fixed, Listener.serve(fixed, identity));
  }

  private static serve(options: ServeOptions, identity: TlsIdentity): Server<undefined> {
    return Bun.serve({ ...options, reusePort: true, tls: { cert: identity.cert, key: identity.key, secureOptions, ciphers } }) as Server<undefined>;
  }

  get port(): number {
    return this.current.port!;
  }

  /** Serves `identity` to new connections from now on; the old server's connections finish on the old one. */
  reload(identity: TlsIdentity): void {
    const old = this.current;
    this.current = Listener.serve(this.options, identity);
    this.draining.add(old);
    void old.stop(false).finally(() => this.draining.delete(old));
  }

  /** Stops accepting; with `closeActive`, also ends every connection (requests in flight included). */
  async stop(closeActive: boolean): Promise<void> {
    await Promise.all([this.current, ...this.draining].map((server) => server.stop(closeActive)));
  }
}
