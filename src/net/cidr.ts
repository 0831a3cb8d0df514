import { BlockList, isIP } from "node:net";

/**
 * Address ranges, the one implementation importd has (node:net's BlockList): the trusted proxies
 * (http/client-address.ts) and the webhook destinations (webhooks/destinations.ts) both match through it.
 */

export type Cidr = { address: string; prefix: number; family: "ipv4" | "ipv6" };

/** An address (a /32 or /128) or a CIDR range. Host bits set in a range are ignored. Throws on anything else. */
export function parseCidr(text: string): Cidr {
  const [address = "", prefixText, extra] = text.trim().split("/");
  // A zone (fe80::1%eth0) names an interface of this host, which a range cannot mean.
  const version = address.includes("%") ? 0 : isIP(address);
  const bits = version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? bits : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : Number.NaN;
  if (version === 0 || extra !== undefined || !(prefix >= 0 && prefix <= bits)) {
    throw new Error(`'${text.trim()}' is not an address or CIDR range (such as 10.0.0.0/8, 192.168.1.10 or fd00::/8)`);
  }
  return { address, prefix, family: version === 4 ? "ipv4" : "ipv6" };
}

/**
 * Whether an address falls in one of the ranges (CIDR texts, or parsed). Throws on a bad range. What is not an
 * address is in none. A zone (fe80::1%eth0) is left out of the address.
 *
 * BlockList matches an IPv4-mapped IPv6 address (::ffff:10.0.0.1, what a dual-stack socket or resolver reports)
 * against IPv4 ranges, and an IPv4 address against IPv6 ranges that hold its mapped form (::ffff:0:0/96, ::/0).
 */
export function addressesIn(ranges: ReadonlyArray<string | Cidr>): (address: string) => boolean {
  if (ranges.length === 0) return () => false;
  const list = new BlockList();
  for (const range of ranges) {
    const { address, prefix, family } = typeof range === "string" ? parseCidr(range) : range;
    list.addSubnet(address, prefix, family);
  }
  return (address) => {
    const bare = withoutZone(address);
    const family = isIP(bare);
    return family !== 0 && list.check(bare, family === 4 ? "ipv4" : "ipv6");
  };
}

export const withoutZone = (address: string) => address.replace(/%.*$/, "");
