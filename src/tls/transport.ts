// How importd serves (DECISIONS 9): plain HTTP on a loopback address, where the quick start's curl walk-through
// runs; HTTPS on any other, with the operator's certificate or one importd made; plain HTTP there only when the
// operator says so with a flag that names the risk.
import { readFileSync } from "node:fs";
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

export type Family = "IPv4" | "IPv6";

/**
 * The address families a wildcard host serves: 0.0.0.0 every IPv4 address only; :: both, as Linux has it by default,
 * or IPv6 only where net.ipv6.bindv6only is 1. Undefined for a host that is one address.
 */
export function wildcardFamilies(host: string, bindv6only = readBindV6Only()): Family[] | undefined {
  if (host === "0.0.0.0") return ["IPv4"];
  if (host === "::" || host === "[::]") return bindv6only ? ["IPv6"] : ["IPv4", "IPv6"];
  return undefined;
}

function readBindV6Only(): boolean {
  try {
    return readFileSync("/proc/sys/net/ipv6/bindv6only", "utf8").trim() === "1";
  } catch {
    return false;
  }
}

/** Where a wildcard host is reachable, as the listening line says it; undefined for one address. */
export function reachableOn(host: string, bindv6only = readBindV6Only()): string | undefined {
  const families = wildcardFamilies(host, bindv6only);
  if (!families) return undefined;
  if (families.length === 2) return "on every IPv4 and IPv6 address of this machine";
  return families[0] === "IPv4" ? "on every IPv4 address of this machine (IPv6 too: --host ::)" : "on every IPv6 address of this machine (net.ipv6.bindv6only is 1)";
}

/**
 * The names clients may reach this server by: the machine's name, localhost and the listening addresses (every
 * address of the machine in the families served, for a wildcard host), then `extra` (--tls-san). What the
 * self-signed certificate names: not ::1 on 0.0.0.0, where nothing answers on it.
 */
export function serverNames(host: string, extra: readonly string[], bindv6only = readBindV6Only()): string[] {
  const families = wildcardFamilies(host, bindv6only);
  const addresses = families
    ? Object.values(networkInterfaces())
        .flat()
        .filter((address) => address !== undefined && families.includes(address.family as Family))
        .map((address) => address!.address)
    : [host.replace(/^\[|\]$/g, "")];
  const loopbacks = families ? [...(families.includes("IPv4") ? ["127.0.0.1"] : []), ...(families.includes("IPv6") ? ["::1"] : [])] : ["127.0.0.1", "::1"];
  return [...new Set([hostname(), "localhost", ...loopbacks, ...addresses, ...extra].filter((name) => name !== "" && !wildcard(name)))];
}

/** The names a client is likely to use for this server, which the certificate in use should name. */
export const expectedNames = (host: string) => (wildcard(host) ? [hostname()] : [host.replace(/^\[|\]$/g, "")]);
