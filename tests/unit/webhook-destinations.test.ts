import { describe, expect, test } from "bun:test";
import { parseWebhookAllow } from "../../src/net/allow-list";
import { checkUrl, type Lookup, resolveDestination } from "../../src/webhooks/destinations";

/** A resolver that knows only these names, and counts what it was asked. */
function fakeDns(table: Record<string, string[]>): Lookup & { asked: string[] } {
  const asked: string[] = [];
  const lookup = async (name: string) => {
    asked.push(name);
    const addresses = table[name];
    if (addresses === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: "ENOTFOUND" });
    return addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
  return Object.assign(lookup, { asked });
}

const reasonOf = (result: { ok: boolean; reason?: string }) => (result.ok ? "ok" : result.reason);
/** What a refusal tells the server's log only: what the name resolved to, and why that is refused. */
const loggedOf = (result: { ok: boolean; resolved?: string }) => (result.ok ? "ok" : result.resolved);

describe("parseWebhookAllow: the operator's list", () => {
  test("an empty list (the default) turns webhooks off", () => {
    for (const text of ["", " ", ",", " , "]) expect(parseWebhookAllow(text).isEmpty).toBe(true);
  });

  test("host names, wildcards, addresses and ranges of both families, normalised", () => {
    const allow = parseWebhookAllow(" Hooks.Example.com, *.example.org ,*, 203.0.113.0/24,10.1.2.3, fd00::/8, ::1, bücher.example, example.net.,");
    expect(allow.isEmpty).toBe(false);
    expect(allow.entries).toEqual(["hooks.example.com", "*.example.org", "*", "203.0.113.0/24", "10.1.2.3", "fd00::/8", "::1", "xn--bcher-kva.example", "example.net"]);
    expect(Object.isFrozen(allow)).toBe(true);
  });

  test("a malformed entry is named in a one-line message", () => {
    const bad = ["10.0.0.0/33", "fd00::/129", "10.0.0.0/8/8", "10.0.0.0/", "10.0.0.0/-1", "10.0.0", "10.0.0.256", "1::2::3", "hooks.example.com:8443", "https://hooks.example.com", "user@example.com", "hooks.*.com", "*.*.example.com", "*example.com", "-bad.example.com", "a b.example", "fe80::1%eth0", "0x7f000001"];
    for (const entry of bad) {
      expect(() => parseWebhookAllow(`hooks.example.com, ${entry}`)).toThrow(`--webhook-allow: '${entry}' is not a host name or a CIDR`);
    }
    expect(() => parseWebhookAllow("10.0.0.0/33")).toThrow(/^--webhook-allow: '10\.0\.0\.0\/33' is not a host name or a CIDR \(such as [^\n]*\)$/);
  });
});

describe("checkUrl: the check when a subscription is made", () => {
  const allow = parseWebhookAllow("hooks.example.com,*.example.org,203.0.113.0/24,10.1.2.3,fd00::/8");

  test("webhooks off: every URL is refused, saying why", () => {
    expect(reasonOf(checkUrl("https://hooks.example.com/x", parseWebhookAllow("")))).toBe(
      "webhooks are off on this server: the operator has not allowed any destination (--webhook-allow)",
    );
  });

  test("only absolute http and https URLs, without credentials", () => {
    expect(reasonOf(checkUrl("ftp://hooks.example.com/x", allow))).toBe("only http and https URLs can receive webhooks");
    expect(reasonOf(checkUrl("file:///etc/passwd", allow))).toBe("only http and https URLs can receive webhooks");
    expect(reasonOf(checkUrl("https://user:secret@hooks.example.com/x", allow))).toStartWith("a webhook URL must not hold a user name or password");
    expect(reasonOf(checkUrl("https://user@hooks.example.com/x", allow))).toStartWith("a webhook URL must not hold a user name or password");
    expect(reasonOf(checkUrl("/relative/path", allow))).toStartWith("'/relative/path' is not a URL: give an absolute http or https URL");
  });

  test("names: exactly, or below a wildcard (not the wildcard's own name)", () => {
    const accepted = checkUrl("https://Hooks.Example.COM:8443/importd?token=abc", allow);
    expect(accepted.ok && accepted.url.href).toBe("https://hooks.example.com:8443/importd?token=abc");
    expect(checkUrl("http://hooks.example.com./x", allow).ok).toBe(true);
    expect(checkUrl("https://a.b.example.org/x", allow).ok).toBe(true);
    expect(reasonOf(checkUrl("https://example.org/x", parseWebhookAllow("*.example.org")))).toBe(
      "https://example.org is not allowed: example.org is not in --webhook-allow (the operator's list of webhook destinations)",
    );
    expect(checkUrl("https://evilexample.org/x", parseWebhookAllow("*.example.org")).ok).toBe(false);
    expect(checkUrl("https://other.example.com/x", parseWebhookAllow("hooks.example.com")).ok).toBe(false);
    expect(checkUrl("https://anything.test/x", parseWebhookAllow("*")).ok).toBe(true);
  });

  test("addresses: only inside an allowed range, whatever way the URL writes them", () => {
    expect(checkUrl("http://203.0.113.77/x", allow).ok).toBe(true);
    expect(checkUrl("http://10.1.2.3:9000/x", allow).ok).toBe(true);
    expect(reasonOf(checkUrl("http://10.0.0.5/x?token=secret", allow))).toBe(
      "http://10.0.0.5 is not allowed: 10.0.0.5 is not in --webhook-allow (the operator's list of webhook destinations)",
    );
    // The URL parser's other spellings of 127.0.0.1 are the address, not names a host entry could match.
    for (const url of ["http://0x7f000001/", "http://127.1/", "http://2130706433/"]) {
      expect(reasonOf(checkUrl(url, parseWebhookAllow("*")))).toContain("127.0.0.1 is not in --webhook-allow");
    }
    expect(reasonOf(checkUrl("http://8.8.8.8/", parseWebhookAllow("*")))).toContain("8.8.8.8 is not in --webhook-allow");
  });

  test("IPv6 addresses, and IPv4 ones written as IPv6, are judged as the address they lead to", () => {
    expect(checkUrl("http://[fd12::1]:8080/x", allow).ok).toBe(true);
    expect(reasonOf(checkUrl("http://[fe80::1]/x", allow))).toContain("fe80::1 is not in --webhook-allow");
    expect(checkUrl("http://[::ffff:203.0.113.9]/x", allow).ok).toBe(true);
    expect(checkUrl("http://[::ffff:127.0.0.1]/x", allow).ok).toBe(false);
    expect(checkUrl("http://[::ffff:127.0.0.1]/x", parseWebhookAllow("127.0.0.0/8")).ok).toBe(true);
  });

  test("with ranges in the list, a name no host entry matches waits for delivery, where its addresses decide", () => {
    expect(checkUrl("http://localhost:1234/", parseWebhookAllow("127.0.0.1/32")).ok).toBe(true);
    expect(checkUrl("http://localhost:1234/", parseWebhookAllow("hooks.example.com")).ok).toBe(false);
  });
});

describe("resolveDestination: the check at each delivery, after DNS", () => {
  const dns = fakeDns({
    "hooks.example.com": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
    "internal.example.com": ["10.0.0.5"],
    "metadata.example.com": ["169.254.169.254"],
    "mapped.example.com": ["::ffff:127.0.0.1"],
    "nat64.example.com": ["64:ff9b::a9fe:a9fe"],
    "public-nat64.example.com": ["64:ff9b::808:808"],
    "half.example.com": ["93.184.215.14", "192.168.1.10"],
    "ula.example.com": ["fd00::5"],
    "v6.example.com": ["2001:db8::1"],
    "localhost": ["127.0.0.1", "::1"],
    "empty.example.com": [],
  });

  const resolve = (url: string, allow: string) => resolveDestination(new URL(url), parseWebhookAllow(allow), dns);

  test("a public name matched by a host entry: the first address, with all of them", async () => {
    expect(await resolve("https://hooks.example.com/x", "hooks.example.com")).toEqual({
      ok: true,
      address: "93.184.215.14",
      family: 4,
      addresses: [
        { address: "93.184.215.14", family: 4 },
        { address: "2606:2800:21f:cb07:6820:80da:af6b:8b2c", family: 6 },
      ],
    });
    expect((await resolve("https://hooks.example.com/x", "*")).ok).toBe(true);
  });

  test("a name that resolves into the appliance's network is refused, however the list names it", async () => {
    const internal = await resolve("https://internal.example.com/x", "*.example.com");
    expect(loggedOf(internal)).toBe("internal.example.com resolves to 10.0.0.5, a private address, which is not in --webhook-allow (the operator's list of webhook destinations)");
    // The answer says the destination is refused and how to allow it, never what the name resolves to.
    expect(reasonOf(internal)).toBe(
      "https://internal.example.com is not allowed: internal.example.com resolves to an address outside --webhook-allow (the operator's list of webhook destinations). If it should receive webhooks, the operator can allow the name or its addresses with --webhook-allow",
    );
    expect(loggedOf(await resolve("http://metadata.example.com/latest", "*"))).toContain("resolves to 169.254.169.254, a link-local address");
    expect(loggedOf(await resolve("http://mapped.example.com/", "*"))).toContain("resolves to ::ffff:127.0.0.1, a loopback address");
    expect(loggedOf(await resolve("http://nat64.example.com/", "*"))).toContain("resolves to 64:ff9b::a9fe:a9fe, a link-local address");
    expect(loggedOf(await resolve("http://ula.example.com/", "*"))).toContain("resolves to fd00::5, a private (unique local) address");
    expect((await resolve("http://public-nat64.example.com/", "*")).ok).toBe(true);
    for (const url of ["http://metadata.example.com/", "http://mapped.example.com/", "http://nat64.example.com/", "http://ula.example.com/", "http://localhost:1234/"]) {
      expect(reasonOf(await resolve(url, "*"))).not.toMatch(/169\.254|127\.0|a9fe|fd00|private|loopback|link-local/);
    }
  });

  test("of several addresses, only the allowed ones are used: a forbidden one is never connected to; none allowed refuses the name", async () => {
    expect(await resolve("https://half.example.com/x", "half.example.com")).toEqual({ ok: true, address: "93.184.215.14", family: 4, addresses: [{ address: "93.184.215.14", family: 4 }] });
    expect(loggedOf(await resolve("https://internal.example.com/x", "internal.example.com"))).toContain("resolves to 10.0.0.5, a private address");
  });

  test("localhost: named in the list, its loopback addresses are allowed (RFC 6761); an address range allows only the addresses in it; * does not reach it", async () => {
    expect(checkUrl("http://localhost:1234/", parseWebhookAllow("localhost")).ok).toBe(true);
    const named = await resolve("http://localhost:1234/", "localhost");
    expect(named.ok && named.addresses).toEqual([
      { address: "127.0.0.1", family: 4 },
      { address: "::1", family: 6 },
    ]);
    expect((await resolve("http://localhost:1234/", "*.localhost,hooks.example.com")).ok).toBe(false);
    expect(await resolve("http://localhost:1234/", "127.0.0.1/32")).toEqual({ ok: true, address: "127.0.0.1", family: 4, addresses: [{ address: "127.0.0.1", family: 4 }] });
    expect(loggedOf(await resolve("http://localhost:1234/", "*"))).toContain("localhost resolves to 127.0.0.1, a loopback address");
    // Only a localhost name: another name that resolves to loopback is refused, however the list names it.
    expect(loggedOf(await resolve("http://mapped.example.com/", "mapped.example.com"))).toContain("a loopback address");
  });

  test("a range allows private addresses, by name or IPv4-mapped; the name needs no host entry then", async () => {
    expect((await resolve("https://internal.example.com/x", "10.0.0.0/8")).ok).toBe(true);
    expect((await resolve("http://mapped.example.com/", "127.0.0.1")).ok).toBe(true);
    expect((await resolve("http://nat64.example.com/", "169.254.169.254")).ok).toBe(true);
    expect((await resolve("http://ula.example.com/", "fd00::/8")).ok).toBe(true);
    expect(loggedOf(await resolve("http://ula.example.com/", "fd01::/16"))).toContain("fd00::5, a private (unique local) address");
  });

  test("a public address the name resolves to needs the name in the list, not only some range", async () => {
    const publicAddress = await resolve("http://v6.example.com/", "10.0.0.0/8");
    expect(loggedOf(publicAddress)).toBe("v6.example.com resolves to 2001:db8::1, and neither the name nor the address is in --webhook-allow (the operator's list of webhook destinations)");
    expect(reasonOf(publicAddress)).not.toContain("2001:db8::1");
    expect(await resolve("http://v6.example.com/", "2001:db8::/32")).toMatchObject({ ok: true, address: "2001:db8::1", family: 6 });
  });

  test("an address in the URL is not looked up", async () => {
    const before = dns.asked.length;
    expect(await resolve("http://[fd00::7]:9/x", "fd00::/8")).toEqual({ ok: true, address: "fd00::7", family: 6, addresses: [{ address: "fd00::7", family: 6 }] });
    expect(await resolve("http://10.1.2.3/x", "10.1.2.3")).toMatchObject({ ok: true, address: "10.1.2.3", family: 4 });
    expect(dns.asked.length).toBe(before);
  });

  test("the list is applied again at delivery: a URL it no longer allows is refused before DNS", async () => {
    const before = dns.asked.length;
    expect(reasonOf(await resolve("https://hooks.example.com/x", "other.example.com"))).toContain("hooks.example.com is not in --webhook-allow");
    expect(reasonOf(await resolve("https://hooks.example.com/x", ""))).toStartWith("webhooks are off on this server");
    expect(dns.asked.length).toBe(before);
  });

  test("a name DNS does not know, or that has no address, is a reason, not an exception", async () => {
    expect(reasonOf(await resolve("https://nowhere.example.com/x", "*"))).toBe("https://nowhere.example.com could not be reached: nowhere.example.com has no address in DNS (ENOTFOUND)");
    expect(reasonOf(await resolve("https://empty.example.com/x", "*"))).toBe("https://empty.example.com could not be reached: empty.example.com has no address in DNS");
  });

  test("the special ranges' edges", async () => {
    const edges: Array<[string, boolean]> = [
      ["0.255.255.255", false],
      ["1.0.0.0", true],
      ["100.63.255.255", true],
      ["100.64.0.0", false],
      ["100.127.255.255", false],
      ["100.128.0.0", true],
      ["172.15.255.255", true],
      ["172.16.0.0", false],
      ["172.31.255.255", false],
      ["172.32.0.0", true],
      ["192.0.0.255", false],
      ["192.0.1.0", true],
      ["198.17.255.255", true],
      ["198.18.0.0", false],
      ["198.19.255.255", false],
      ["198.20.0.0", true],
      ["223.255.255.255", true],
      ["224.0.0.1", false],
      ["255.255.255.255", false],
      ["::", false],
      ["::2", false],
      ["0:0:0:1::", true],
      ["fbff:ffff::1", true],
      ["fc00::1", false],
      ["fe80::1", false],
      ["febf:ffff::1", false],
      ["fec0::1", false],
      ["feff:ffff::1", false],
      ["ff00::", false],
      ["ff02::1", false],
      ["::ffff:10.0.0.1", false],
      ["::ffff:8.8.8.8", true],
      ["0:0:0:0:0:ffff:0a00:0001", false],
    ];
    for (const [address, allowed] of edges) {
      const result = await resolveDestination(new URL("http://edge.example.com/"), parseWebhookAllow("*"), async () => [{ address, family: address.includes(":") ? 6 : 4 }]);
      expect({ address, allowed: result.ok }).toEqual({ address, allowed });
    }
  });
});

describe("IPv6 ranges that lead into the appliance's network or nowhere public (DECISIONS 15)", () => {
  /** Judges one address a name resolves to, with the list given: "ok", or the refusal as the log gives it (the answer names no address). */
  const judge = async (address: string, allow = "*") =>
    loggedOf(await resolveDestination(new URL("http://receiver.example.com/"), parseWebhookAllow(allow), async () => [{ address, family: 6 }]));

  test("6to4 is judged by the IPv4 address inside it: a private, loopback or link-local one is refused, a public one is not", async () => {
    expect(await judge("2002:0a00:0001::")).toBe(
      "receiver.example.com resolves to 2002:0a00:0001::, a 6to4 address leading to a private address, which is not in --webhook-allow (the operator's list of webhook destinations)",
    );
    expect(await judge("2002:7f00:1::1")).toContain("a 6to4 address leading to a loopback address");
    expect(await judge("2002:a9fe:a9fe::")).toContain("a 6to4 address leading to a link-local address");
    expect(await judge("2002:c0a8:0101:1::5")).toContain("a 6to4 address leading to a private address");
    // 8.8.8.8 inside: public, so allowed as 8.8.8.8 would be, by the name.
    expect(await judge("2002:0808:0808::1")).toBe("ok");
    expect(await judge("2002:0808:0808::1", "10.0.0.0/8")).toContain("neither the name nor the address is in --webhook-allow");
  });

  test("6to4 around a loopback address is not loopback: a localhost name does not reach it", async () => {
    const dns = async () => [{ address: "2002:7f00:1::", family: 6 }];
    expect(loggedOf(await resolveDestination(new URL("http://localhost:1234/"), parseWebhookAllow("localhost"), dns))).toContain("a 6to4 address leading to a loopback address");
  });

  test("local-use NAT64 (64:ff9b:1::/48), Teredo (2001::/32), IPv4-compatible (::/96) and site-local (fec0::/10) are refused, edges included", async () => {
    const refused: Array<[string, string]> = [
      ["64:ff9b:1::a00:1", "a local-use NAT64 address"],
      ["64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "a local-use NAT64 address"],
      ["2001::1", "a Teredo address"],
      ["2001:0:ffff:ffff:ffff:ffff:ffff:ffff", "a Teredo address"],
      ["::8.8.8.8", "an IPv4-compatible address (deprecated)"],
      ["::a00:1", "an IPv4-compatible address (deprecated)"],
      ["fec0::1", "a site-local address (deprecated)"],
      ["feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "a site-local address (deprecated)"],
    ];
    for (const [address, kind] of refused) expect({ address, reason: await judge(address) }).toEqual({ address, reason: expect.stringContaining(`resolves to ${address}, ${kind}, which is not in`) });
    // Just outside them: public.
    for (const address of ["64:ff9b:2::1", "64:ff9b:0:1::1", "2001:1::1", "2003::1", "::1:0:0:0", "fbff::1"]) expect({ address, reason: await judge(address) }).toEqual({ address, reason: "ok" });
  });

  test("the well-known NAT64 prefix (64:ff9b::/96) still leads to the IPv4 address inside it, by the special ranges and the allowed ones", async () => {
    expect(await judge("64:ff9b::10.0.0.1")).toContain("a private address");
    expect(await judge("64:ff9b::8.8.8.8")).toBe("ok");
    expect(await judge("64:ff9b::10.0.0.1", "10.0.0.0/8")).toBe("ok");
  });

  test("each is allowed where a range in --webhook-allow holds it", async () => {
    const named: Array<[string, string]> = [
      ["2002:0a00:0001::", "2002::/16"],
      ["2002:0a00:0001::", "2002:a00:1::/48"],
      ["64:ff9b:1::a00:1", "64:ff9b:1::/48"],
      ["2001::1", "2001::/32"],
      ["::a00:1", "::/96"],
      ["fec0::1", "fec0::/10"],
    ];
    for (const [address, range] of named) expect({ address, range, reason: await judge(address, range) }).toEqual({ address, range, reason: "ok" });
    // A range of the IPv4 address inside a 6to4 one does not allow it: the receiver is not that IPv4 host.
    expect(await judge("2002:0a00:0001::", "10.0.0.0/8")).toContain("a 6to4 address leading to a private address");
  });

  test("at subscription, an address in the URL needs an allowed range, as before", () => {
    expect(checkUrl("http://[2002:a00:1::]/x", parseWebhookAllow("*")).ok).toBe(false);
    expect(checkUrl("http://[2002:a00:1::]/x", parseWebhookAllow("2002::/16")).ok).toBe(true);
  });
});
