import { connect } from "node:tls";

export type Peer = { fingerprint: string; names: string; validTo: string };

/** The certificate the server at `url` shows, read without trusting it; undefined when it cannot be read. */
export function peerCertificate(url: URL): Promise<Peer | undefined> {
  return new Promise((resolve) => {
    const host = url.hostname.replace(/^\[|\]$/g, "");
    const socket = connect({ host, port: Number(url.port || 443), servername: /^[\d.]+$|:/.test(host) ? undefined : host, rejectUnauthorized: false }, () => {
      const certificate = socket.getPeerCertificate();
      socket.destroy();
      resolve(certificate?.fingerprint256 ? { fingerprint: certificate.fingerprint256, names: certificate.subjectaltname ?? "", validTo: certificate.valid_to } : undefined);
    });
    socket.setTimeout(5_000, () => (socket.destroy(), resolve(undefined)));
    socket.on("error", () => resolve(undefined));
  });
}

