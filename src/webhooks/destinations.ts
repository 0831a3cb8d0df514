import { lookup as systemLookup } from "node:dns/promises";
import { isIP } from "node:net";
import type { AllowList, NamePattern } from "../net/allow-list";
import { addressesIn, withoutZone } from "../net/cidr";
import { ipv4In, ipv6Groups } from "../net/ipv6";

/**
 * Where webhooks may go: the operator's `--webhook-allow`, so that a subscriber cannot make importd send requests
 * into the network it runs in (SSRF: cloud metadata at 169.254.169.254, databases and admin pages on 10.x, the host's
 * own loopback).
 *
 * `--webhook-allow` is a comma-separated list; empty (the default) turns webhooks off. Its entries are
 * - host names: `hooks.example.com` (exactly that name), `*.example.com` (any name below example.com, not
 *   example.com itself), `*` (any host name);
 * - addresses and CIDR ranges, IPv4 or IPv6: `203.0.113.0/24`, `10.1.2.3` (a /32), `fd00::/8`, `::1` (a /128).
 *
 * When a subscription is made (`checkUrl`), its URL must be http or https, hold no user name or password, and have a
 * host. An IP address as the host must be inside an allowed range. A name must match a host entry, or, if the list
 * has ranges, it is accepted and judged at each delivery by the addresses it resolves to.
 *
 * At each delivery (`resolveDestination`) the name is resolved again (every A and AAAA address) and each address is
 * judged; the request goes only to the allowed ones, and when none is, nothing is sent:
 * - an address inside an allowed range is allowed;
 * - a loopback address is allowed for a localhost name (`localhost`, or a name below it: RFC 6761 keeps them on
 *   loopback) that a host entry names as such (`localhost`, `*.localhost`; not `*`), since the operator asked for it;
 * - any other address is allowed only if it is public (in none of the special ranges below) AND the name matched a
 *   host entry.
 * So `--webhook-allow localhost` delivers to http://localhost:8080/ (on 127.0.0.1 or ::1), as `--webhook-allow
 * 127.0.0.1` does (on 127.0.0.1 only), while `--webhook-allow '*'` does not. An address that is refused is never
 * connected to: the request goes to an address that was checked, not to the name resolved anew (see send.ts), so DNS
 * cannot change the answer between the check and the connection (DNS rebinding).
 *
 * Special ranges, refused unless a range in `--webhook-allow` includes them: 0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10,
 * 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, 192.0.0.0/24, 192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/4, 240.0.0.0/4,
 * 255.255.255.255; ::/128, ::1/128, ::/96 (IPv4-compatible), 64:ff9b:1::/48 (local-use NAT64), 2001::/32 (Teredo),
 * fc00::/7, fe80::/10, fec0::/10 (site-local), ff00::/8. An IPv4-mapped IPv6 address (::ffff:0:0/96) and a NAT64 one
 * (64:ff9b::/96) lead to the IPv4 address inside them and are judged as that address, by the special ranges and by
 * the allowed ones. A 6to4 address (2002::/16) is special when the IPv4 address inside it is (2002:0a00:0001::
 * holds 10.0.0.1, a private address): it is reached through that address. Ranges are matched by node:net's BlockList
 * (net/cidr.ts).
 */

/** An IP address, without a zone. */
type Address = { text: string; family: 4 | 6 };

// The list the checks below take, as net/allow-list.ts parses it.
export type { AllowList };

/** Answers every address of a name, as node:dns/promises `lookup(name, { all: true })` does. Injectable for tests. */
export type Lookup = (hostname: string, options: { all: true }) => Promise<Array<{ address: string; family: number }>>;

export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string };
export type Destination =
  | {
      ok: true;
      /** The address to connect to: the first of `addresses`. */
      address: string;
      family: 4 | 6;
      /** The addresses the host resolved to that are allowed, in the resolver's order (to try the next one if a connection is refused). */
      addresses: ReadonlyArray<{ address: string; family: 4 | 6 }>;
    }
  | Refusal;

const listName = "--webhook-allow (the operator's list of webhook destinations)";
const webhooksOff = "webhooks are off on this server: the operator has not allowed any destination (--webhook-allow)";

// ---- addresses ------------------------------------------------------------------------------------------------

/** Parses an IPv4 or IPv6 address (a zone, fe80::1%eth0, is left out); undefined for anything else. */
function parseAddress(text: string): Address | undefined {
  const bare = withoutZone(text);
  const family = isIP(bare);
  return family === 0 ? undefined : { text: bare, family: family as 4 | 6 };
}

// IPv4-mapped addresses are how a dual-stack resolver or socket writes an IPv4 address; NAT64 ones (the well-known
// prefix) are translated to the IPv4 address by a gateway. Either way the request ends at the IPv4 address, so that
// is the one judged, by the special ranges and by the allowed ones.
const leadsToIPv4 = addressesIn(["::ffff:0:0/96", "64:ff9b::/96"]);
// A 6to4 address is reached through the 6to4 router at the IPv4 address inside it: one inside the appliance's
// network (2002:0a00:0001:: holds 10.0.0.1) would carry the request there. Judged by that address among the special
// ranges; only a range that holds the 6to4 address itself allows it (the IPv4 host is not the receiver).
const sixToFour = addressesIn(["2002::/16"]);

/** The IPv4 address inside an IPv6 one that the request would go to (IPv4-mapped, NAT64), if any. */
function ipv4LeadingTo(address: Address): Address | undefined {
  if (address.family !== 6 || !leadsToIPv4(address.text)) return undefined;
  const groups = ipv6Groups(address.text)!;
  return { text: ipv4In(groups[6]!, groups[7]!), family: 4 };
}

/** The IPv4 address of the 6to4 router a 6to4 address is reached through (2002:AABB:CCDD::/48), if it is one. */
function sixToFourRouter(address: Address): Address | undefined {
  if (address.family !== 6 || !sixToFour(address.text)) return undefined;
  const groups = ipv6Groups(address.text)!;
  return { text: ipv4In(groups[1]!, groups[2]!), family: 4 };
}

const loopback = "a loopback address";
/**
 * The ranges no webhook goes to unless the operator allows them by range, each with what it is, for messages. The
 * first that holds an address names it.
 */
const specialRanges: ReadonlyArray<[(address: string) => boolean, string]> = (
  [
    ["0.0.0.0/8", "a 'this network' address"],
    ["10.0.0.0/8", "a private address"],
    ["100.64.0.0/10", "a shared (carrier-grade NAT) address"],
    ["127.0.0.0/8", loopback],
    ["169.254.0.0/16", "a link-local address (where cloud metadata services answer)"],
    ["172.16.0.0/12", "a private address"],
    ["192.0.0.0/24", "an IETF protocol address"],
    ["192.168.0.0/16", "a private address"],
    ["198.18.0.0/15", "a benchmarking address"],
    ["224.0.0.0/4", "a multicast address"],
    // Before 240.0.0.0/4, which includes it.
    ["255.255.255.255", "the broadcast address"],
    ["240.0.0.0/4", "a reserved address"],
    // Before ::/96, which includes both.
    ["::/128", "the unspecified address"],
    ["::1/128", loopback],
    ["::/96", "an IPv4-compatible address (deprecated)"],
    ["64:ff9b:1::/48", "a local-use NAT64 address"],
    ["2001::/32", "a Teredo address"],
    ["fc00::/7", "a private (unique local) address"],
    ["fe80::/10", "a link-local address"],
    ["fec0::/10", "a site-local address (deprecated)"],
    ["ff00::/8", "a multicast address"],
  ] as const
).map(([cidr, kind]) => [addressesIn([cidr]), kind]);

/** `localhost` and the names below it, which RFC 6761 keeps on loopback. */
const isLocalhostName = (name: string) => name === "localhost" || name.endsWith(".localhost");

/** What kind of special address this is, or undefined for a public one. */
function specialKind(address: Address): string | undefined {
  const inner = ipv4LeadingTo(address);
  if (inner) return specialKind(inner);
  const router = sixToFourRouter(address);
  if (router) {
    const kind = specialKind(router);
    // Never the loopback kind itself: that would let a localhost name through to it.
    return kind === undefined ? undefined : `a 6to4 address leading to ${kind}`;
  }
  return specialRanges.find(([inRange]) => inRange(address.text))?.[1];
}

// Built once per list; the list itself stays plain data (it is compared and shown).
const allowedRanges = new WeakMap<AllowList, (address: string) => boolean>();
function inAllowedRange(address: Address, allow: AllowList): boolean {
  let inRanges = allowedRanges.get(allow);
  if (!inRanges) allowedRanges.set(allow, (inRanges = addressesIn(allow.ranges)));
  const inner = ipv4LeadingTo(address);
  return inRanges(address.text) || (inner !== undefined && inRanges(inner.text));
}

// ---- the list (net/allow-list.ts parses it) -------------------------------------------------------------------

function matches(name: string, pattern: NamePattern): boolean {
  switch (pattern.kind) {
    case "any":
      return true;
    case "exactly":
      return name === pattern.name;
    case "below":
      return name.endsWith(pattern.suffix);
  }
}
const nameMatches = (name: string, allow: AllowList) => allow.names.some((pattern) => matches(name, pattern));
/** A localhost name the list names as such: `*` alone does not let a subscriber reach loopback. */
const localhostAllowed = (name: string, allow: AllowList) =>
  isLocalhostName(name) && allow.names.some((pattern) => pattern.kind !== "any" && matches(name, pattern));

// ---- checks ---------------------------------------------------------------------------------------------------

/** The URL's host: an address (brackets of IPv6 removed), or a name (without a trailing dot). */
function hostOf(url: URL): { literal: Address; text: string } | { literal?: undefined; name: string } {
  const bare = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const literal = parseAddress(bare);
  return literal ? { literal, text: bare } : { name: url.hostname.replace(/\.$/, "") };
}

/**
 * A destination refused. `reason` is for the subscriber (answered, stored with the attempt, shown); `resolved`, what the
 * name resolved to and why that is refused, is for the server's log only: answered, it would tell a key holder what
 * the appliance's DNS says about names inside its network (DECISIONS 15).
 */
export type Refusal = { ok: false; reason: string; resolved?: string };

// The origin, not the whole URL: a path or query often holds the receiver's own token, and reasons are stored and shown.
const refused = (url: URL, why: string, resolved?: string): Refusal => ({ ok: false, reason: `${url.origin} is not allowed: ${why}`, ...(resolved === undefined ? {} : { resolved }) });

/** The subscription-time check: the URL's form, and its host against the list (no DNS). */
export function checkUrl(text: string, allow: AllowList): UrlCheck {
  if (allow.isEmpty) return { ok: false, reason: webhooksOff };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { ok: false, reason: `'${text}' is not a URL: give an absolute http or https URL, such as https://hooks.example.com/importd` };
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return { ok: false, reason: "only http and https URLs can receive webhooks" };
  if (url.username !== "" || url.password !== "") {
    return { ok: false, reason: "a webhook URL must not hold a user name or password: put a secret in the path or query if the receiver needs one, and verify the webhook-signature header" };
  }
  if (url.hostname === "") return { ok: false, reason: "a webhook URL needs a host, such as https://hooks.example.com/importd" };
  const host = hostOf(url);
  if (host.literal) {
    return inAllowedRange(host.literal, allow) ? { ok: true, url } : refused(url, `${host.text} is not in ${listName}`);
  }
  // A name no host entry matches may still resolve into an allowed range: that is known only at delivery.
  if (nameMatches(host.name, allow) || allow.ranges.length > 0) return { ok: true, url };
  return refused(url, `${host.name} is not in ${listName}`);
}

/**
 * The delivery-time check: `url` checked again (the list may have changed since the subscription), its name
 * resolved, and every address judged (see the module comment). Answers where to connect. Never throws.
 */
export async function resolveDestination(url: URL, allow: AllowList, lookup: Lookup = systemLookup): Promise<Destination> {
  const checked = checkUrl(url.href, allow);
  if (!checked.ok) return checked;
  const host = hostOf(url);
  if (host.literal) {
    const { family } = host.literal;
    return { ok: true, address: host.text, family, addresses: [{ address: host.text, family }] };
  }
  let answers: Array<{ address: string; family: number }>;
  try {
    answers = await lookup(host.name, { all: true });
  } catch (error) {
    const code = (error as { code?: string }).code;
    const why = code === "ENOTFOUND" || code === "ENODATA" ? "has no address in DNS" : "could not be looked up in DNS";
    return { ok: false, reason: `${url.origin} could not be reached: ${host.name} ${why} (${code ?? (error as Error).message})` };
  }
  if (answers.length === 0) return { ok: false, reason: `${url.origin} could not be reached: ${host.name} has no address in DNS` };
  const matched = nameMatches(host.name, allow);
  const localhost = localhostAllowed(host.name, allow);
  /** Why the request must not go to this address, or undefined when it may. */
  const refusal = (text: string, address: Address | undefined): string | undefined => {
    if (!address) return `resolves to '${text}', which is not an IP address`;
    const kind = specialKind(address);
    if (inAllowedRange(address, allow) || (localhost && kind === loopback)) return undefined;
    if (kind !== undefined) return `resolves to ${text}, ${kind}, which is not in ${listName}`;
    return matched ? undefined : `resolves to ${text}, and neither the name nor the address is in ${listName}`;
  };
  const addresses: Array<{ address: string; family: 4 | 6 }> = [];
  let firstRefusal: string | undefined;
  for (const answer of answers) {
    const address = parseAddress(answer.address);
    const why = refusal(answer.address, address);
    if (why === undefined) addresses.push({ address: answer.address, family: address!.family });
    else firstRefusal ??= why;
  }
  if (addresses.length === 0) {
    return refused(
      url,
      `${host.name} resolves to an address outside ${listName}. If it should receive webhooks, the operator can allow the name or its addresses with --webhook-allow`,
      `${host.name} ${firstRefusal}`,
    );
  }
  return { ok: true, address: addresses[0]!.address, family: addresses[0]!.family, addresses };
}
