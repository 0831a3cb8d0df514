import { isIP } from "node:net";
import { addressesIn } from "../net/cidr";

/**
 * Who sent a request: the TCP peer, unless the peer is a trusted proxy (--trusted-proxies). Then the
 * X-Forwarded-For chain is read from the right, each hop having been appended by the proxy before it, and
 * the client is the first address that is not a trusted proxy. Anything left of that was written by the
 * client itself and may be a lie; an untrusted peer's X-Forwarded-For is never read at all.
 *
 * The default trusts loopback (a proxy on this machine, as gunicorn and uvicorn do): then any process on this
 * machine may also name whatever client it likes. An appliance with no proxy on it is better off with `none`.
 */

export type ProxyTrust = (address: string) => boolean;

/** The reverse proxies (--trusted-proxies) whose X-Forwarded-For is read. */
export const trustedProxies = (cidrs: readonly string[]): ProxyTrust => addressesIn(cidrs);

/**
 * The address in one X-Forwarded-For entry, or undefined if it holds none. Some proxies write the client's port too
 * (`1.2.3.4:5678`, `[2001:db8::1]:443`), or an IPv6 address in brackets without one (`[2001:db8::1]`); a bare IPv6
 * address has colons of its own, so only brackets set a port apart from it. Nothing else is read as an address
 * (no host names, no `0x7f000001`).
 */
export function forwardedAddress(entry: string): string | undefined {
  const text = entry.trim();
  if (isIP(text) !== 0) return text;
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(text);
  if (bracketed) return isIP(bracketed[1]!) === 6 ? bracketed[1] : undefined;
  const withPort = /^([\d.]+):\d{1,5}$/.exec(text);
  return withPort && isIP(withPort[1]!) === 4 ? withPort[1] : undefined;
}

/** The client's address given the TCP peer's and the X-Forwarded-For header (see the module comment). */
export function clientAddressOf(peer: string, forwardedFor: string | null, trusted: ProxyTrust): string {
  if (forwardedFor === null || !trusted(peer)) return peer;
  const hops = forwardedFor.split(",");
  let client = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = forwardedAddress(hops[i]!);
    // Not an address: the chain is broken here, and the last hop that was vouched for is as far as it goes.
    if (hop === undefined) return client;
    client = hop;
    if (!trusted(hop)) return client;
  }
  return client;
}

/**
 * The client address of a request, set by the server's fetch (the only place that has the socket) and read
 * by authentication's rate limit and the request log. Worked out once, when first asked for (the X-Forwarded-For
 * chain); the peer's address comes with it, read by the fetch as the request arrives.
 */
const origins = new WeakMap<Request, { peer: string; client: () => string }>();

export const rememberClientAddress = (request: Request, peer: string, resolve: () => string) => {
  let address: string | undefined;
  origins.set(request, { peer, client: () => (address ??= resolve()) });
};

export const clientAddress = (request: Request) => origins.get(request)?.client() ?? "unknown";
