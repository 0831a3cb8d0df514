import { describe, expect, test } from "bun:test";
import { reachableOn, serverNames, wildcardFamilies } from "../../src/tls/transport";

// What a wildcard host serves, and so what the self-signed certificate names and the listening line says.
describe("wildcard hosts", () => {
  test("0.0.0.0 is IPv4 only; :: is both families unless net.ipv6.bindv6only is 1; one address is neither", () => {
    expect(wildcardFamilies("0.0.0.0", false)).toEqual(["IPv4"]);
    expect(wildcardFamilies("::", false)).toEqual(["IPv4", "IPv6"]);
    expect(wildcardFamilies("[::]", true)).toEqual(["IPv6"]);
    expect(wildcardFamilies("10.0.0.5", false)).toBeUndefined();
  });

  test("the certificate for 0.0.0.0 names 127.0.0.1 and not ::1; for :: both, or ::1 alone with bindv6only", () => {
    expect(serverNames("0.0.0.0", [], false)).toContain("127.0.0.1");
    expect(serverNames("0.0.0.0", [], false)).not.toContain("::1");
    expect(serverNames("::", [], false)).toEqual(expect.arrayContaining(["127.0.0.1", "::1", "localhost"]));
    expect(serverNames("::", [], true)).not.toContain("127.0.0.1");
    expect(serverNames("::", [], true)).toContain("::1");
    expect(serverNames("10.0.0.5", ["importd.example"], false)).toEqual(expect.arrayContaining(["10.0.0.5", "importd.example", "127.0.0.1", "::1"]));
  });

  test("the listening line says where a wildcard host is reachable, and how to serve IPv6 too", () => {
    expect(reachableOn("0.0.0.0", false)).toBe("on every IPv4 address of this machine (IPv6 too: --host ::)");
    expect(reachableOn("::", false)).toBe("on every IPv4 and IPv6 address of this machine");
    expect(reachableOn("::", true)).toBe("on every IPv6 address of this machine (net.ipv6.bindv6only is 1)");
    expect(reachableOn("10.0.0.5", false)).toBeUndefined();
  });
});
