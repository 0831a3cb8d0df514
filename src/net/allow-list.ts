import { isIP } from "node:net";
import { parseCidr, type Cidr } from "./cidr";

/**
 * The list of destinations `--webhook-allow` gives, parsed: host names (`hooks.example.com`, `*.example.com`, `*`)
 * and addresses or CIDR ranges. Here, beside the other address parsing, so that config.ts reads it without importing
 * webhooks/; what the list allows is webhooks/destinations.ts's business.
 */

export type NamePattern = { kind: "exactly"; name: string } | { kind: "below"; suffix: string } | { kind: "any" };

export type AllowList = {
  /** No entries: webhooks are off on this server. */
  readonly isEmpty: boolean;
  /** The entries, normalised (lower case, IDN names in their ASCII form), for the listening line and messages. */
  readonly entries: readonly string[];
  readonly names: readonly NamePattern[];
  readonly ranges: readonly Cidr[];
};

/** An address (a /32 or /128) or a CIDR range, or undefined if the entry is not one. */
function rangeOf(entry: string): Cidr | undefined {
  try {
    return parseCidr(entry);
  } catch {
    return undefined;
  }
}

const label = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/;

/** A host name in its ASCII form (lower case, IDN as punycode, no trailing dot), or undefined if it is not one. */
function hostName(text: string): string | undefined {
  if (text === "" || /[/?#@:\s\[\]\\%*]/.test(text)) return undefined;
  let hostname: string;
  try {
    hostname = new URL(`http://${text}/`).hostname;
  } catch {
    return undefined;
  }
  const name = hostname.replace(/\.$/, "");
  // The URL parser turns what ends in a number (10.0.0, 0x7f000001) into an IPv4 address: not a name.
  if (isIP(name) !== 0 || !name.split(".").every((part) => label.test(part))) return undefined;
  return name;
}

/**
 * Parses `--webhook-allow` (see webhooks/destinations.ts). Empty entries are skipped, so a trailing comma is harmless.
 * Throws an Error naming the first entry that is neither a host name nor an address or range.
 */
export function parseWebhookAllow(text: string): AllowList {
  const names: NamePattern[] = [];
  const ranges: Cidr[] = [];
  const entries: string[] = [];
  for (const raw of text.split(",")) {
    const entry = raw.trim().toLowerCase();
    if (entry === "") continue;
    if (entry === "*") {
      names.push({ kind: "any" });
      entries.push(entry);
      continue;
    }
    const cidr = rangeOf(entry);
    if (cidr) {
      ranges.push(cidr);
      entries.push(entry);
      continue;
    }
    const below = entry.startsWith("*.");
    const name = hostName(below ? entry.slice(2) : entry);
    if (name === undefined) {
      throw new Error(
        `--webhook-allow: '${raw.trim()}' is not a host name or a CIDR (such as hooks.example.com, *.example.com, *, 203.0.113.0/24, 10.1.2.3 or fd00::/8; no ports, no schemes)`,
      );
    }
    names.push(below ? { kind: "below", suffix: `.${name}` } : { kind: "exactly", name });
    entries.push(below ? `*.${name}` : name);
  }
  return Object.freeze({ isEmpty: entries.length === 0, entries: Object.freeze(entries), names: Object.freeze(names), ranges: Object.freeze(ranges) });
}
