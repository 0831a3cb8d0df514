// How importd serves (DECISIONS 9): plain HTTP on a loopback address, where the quick start's curl walk-through
// runs; HTTPS on any other, with the operator's certificate or one importd made; plain HTTP there only when the
// operator says so with a flag that names the risk.
import { hostname, networkInterfaces } from "node:os";
import type { Config } from "../config";

export type Transport =
  | { tls: false; exposed: boolean }
  /** `files`: the operator's certificate and key; without, the self-signed one in the data directory. */
  | { tls: true; files?: { cert: string; key: string } };

/** Whether `host` is this machine only: no other can reach a listener there. */
export const isLoopback = (host: string) => host === "localhost" || /^127\./.test(host) || host === "::1" || host === "[::1]";

const wildcard = (host: string) => host === "0.0.0.0" || host === "::" || host === "[::]";

export function transportFor(config: Pick<Config, "host" | "tlsCert" | "tlsKey" | "insecureHttp">): Transport {
  if (config.tlsCert && config.tlsKey) return { tls: true, files: { cert: config.tlsCert, key: config.tlsKey } };
  if (isLoopback(config.host) || config.insecureHttp) return { tls: false, exposed: !isLoopback(config.host) };
  return { tls: true };
}

/**
 * The names clients may reach this server by: the machine's name, localhost and the listening addresses (every
 * address of the machine, for a wildcard host), then `extra` (--tls-san). What the self-signed certificate names.
 */
export function serverNames(host: string, extra: readonly string[]): string[] {
  const addresses = wildcard(host)
    ? Object.values(networkInterfaces())
        .flat()
        .filter((address) => address !== undefined && (host !== "0.0.0.0" || address.family === "IPv4"))
        .map((address) => address!.address)
    : [host.replace(/^\[|\]$/g, "")];
  return [...new Set([hostname(), "localhost", "127.0.0.1", "::1", ...addresses, ...extra].filter((name) => name !== "" && !wildcard(name)))];
}

/** The names a client is likely to use for this server, which the certificate in use should name. */
export const expectedNames = (host: string) => (wildcard(host) ? [hostname()] : [host.replace(/^\[|\]$/g, "")]);
