import type { Peer } from "./peer-certificate";

/** A browser cannot read a certificate it refused (it shows its own page about it instead): nothing to add. */
export async function peerCertificate(_url: URL): Promise<Peer | undefined> {
  return undefined;
}
