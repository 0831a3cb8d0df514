// What the client says when a server's certificate is refused: what is wrong, and what to do. Never "ignore
// certificate errors": the certificate is read again only to show its fingerprint, for a person to compare with the
// one the server's operator sees (`importd tls fingerprint`).
// peer-certificate.ts, or in a browser bundle peer-certificate.browser.ts (package.json "imports").
import { peerCertificate } from "#peer-certificate";

// The verifier's refusals: no retry can change them.
const untrusted = /^(UNABLE_TO_VERIFY_LEAF_SIGNATURE|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|CERT_UNTRUSTED|CERT_SIGNATURE_FAILURE|CERT_REJECTED)$/;
const expired = /^CERT_(HAS_EXPIRED|NOT_YET_VALID)$/;
const wrongName = /^ERR_TLS_CERT_ALTNAME_INVALID$/;

/** Whether `error` is a refusal of the server's certificate (rather than a network error, worth a retry). */
export const isCertificateError = (error: unknown) => {
  const code = (error as { code?: string })?.code ?? "";
  return untrusted.test(code) || expired.test(code) || wrongName.test(code);
};

/** What to tell a person whose request to `baseUrl` failed on the server's certificate. */
export async function certificateProblem(baseUrl: string, error: unknown): Promise<string> {
  const code = (error as { code?: string })?.code ?? "";
  const url = new URL(baseUrl);
  const peer = await peerCertificate(url);
  if (wrongName.test(code)) {
    return `the server's TLS certificate is not for ${url.hostname}${peer?.names ? ` (it names ${peer.names})` : ""}: connect by a name it has, or give the server a certificate for ${url.hostname} (importd serve --tls-san ${url.hostname}, or --tls-cert)`;
  }
  if (expired.test(code)) return `the server's TLS certificate is out of its validity${peer ? ` (valid until ${peer.validTo})` : ""} (${code}): it must be renewed on the server`;
  return (
    `the server's TLS certificate is not trusted here (${code}). If it is importd's own, pass --ca-file <the server's certificate> (IMPORTD_CA_FILE; ` +
    `a certificate importd made is <data directory>/tls/importd.crt on the server)${peer ? `; the certificate it shows has the SHA-256 fingerprint ${peer.fingerprint}, which must be what \`importd tls fingerprint\` prints there` : ""}`
  );
}
