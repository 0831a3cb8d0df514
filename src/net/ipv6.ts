import { isIP } from "node:net";
import { withoutZone } from "./cidr";

/**
 * The parts of an IPv6 address that say where it leads: its eight 16-bit groups, and an IPv4 address some of them
 * carry (IPv4-mapped, NAT64, 6to4). Matching addresses against ranges is cidr.ts's job, not this one's.
 */

/** The eight groups of an IPv6 address (a dotted IPv4 tail and a zone allowed), or undefined if it is not one. */
export function ipv6Groups(text: string): number[] | undefined {
  let address = withoutZone(text);
  if (isIP(address) !== 6) return undefined;
  // A dotted IPv4 tail (::ffff:10.0.0.1) is the last two groups written differently.
  const lastColon = address.lastIndexOf(":");
  const tail = address.slice(lastColon + 1);
  if (tail.includes(".")) {
    const [a, b, c, d] = tail.split(".").map(Number) as [number, number, number, number];
    address = `${address.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [left = "", right] = address.split("::");
  const groups = (part: string) => (part === "" ? [] : part.split(":").map((group) => Number.parseInt(group, 16)));
  const head = groups(left);
  const rest = right === undefined ? [] : groups(right);
  return [...head, ...Array<number>(8 - head.length - rest.length).fill(0), ...rest];
}

/** The IPv4 address two groups hold, dotted (groups [0x0a00, 0x0001] are 10.0.0.1). */
export const ipv4In = (high: number, low: number) => `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
