import { describe, expect, test } from "bun:test";
import { addressesIn, parseCidr } from "../../src/net/cidr";
import { ipv4In, ipv6Groups } from "../../src/net/ipv6";

describe("parseCidr: an address or a CIDR range", () => {
  test("a bare address is a /32 or /128; spaces around are dropped", () => {
    expect(parseCidr(" 10.0.0.0/8 ")).toEqual({ address: "10.0.0.0", prefix: 8, family: "ipv4" });
    expect(parseCidr("192.168.1.7")).toEqual({ address: "192.168.1.7", prefix: 32, family: "ipv4" });
    expect(parseCidr("fd00::1")).toEqual({ address: "fd00::1", prefix: 128, family: "ipv6" });
  });

  test("refuses what is not an address or a range, a zone included (it names an interface of this host)", () => {
    for (const text of ["proxy.local", "10.0.0.0/33", "10.0.0.0/-1", "10.0.0.0/8/8", "fd00::/129", "10.0.0/8", "", "10.0.0.0/", "fe80::1%eth0", "0x7f000001"]) {
      expect(() => parseCidr(text)).toThrow("is not an address or CIDR range");
    }
  });
});

describe("addressesIn: node:net's BlockList over CIDR texts", () => {
  test("ranges of both families; host bits set in a range are ignored", () => {
    const inside = addressesIn(["10.1.2.3/8", "2001:db8::/32"]);
    expect([inside("10.200.0.1"), inside("11.0.0.1"), inside("2001:db8:ffff::1"), inside("2001:db9::1")]).toEqual([true, false, true, false]);
  });

  test("an IPv4 address written as IPv6 (::ffff:a.b.c.d, or in hex) is in its IPv4 range", () => {
    const inside = addressesIn(["10.0.0.0/8"]);
    expect([inside("::ffff:10.0.0.1"), inside("::ffff:a00:1"), inside("::ffff:11.0.0.1")]).toEqual([true, true, false]);
  });

  test("a zone is left out of the address; what is not an address is in no range; no ranges hold nothing", () => {
    expect(addressesIn(["fe80::/10"])("fe80::1%eth0")).toBe(true);
    expect(addressesIn(["0.0.0.0/0", "::/0"])("unknown")).toBe(false);
    expect(addressesIn(["0.0.0.0/0"])("10.0.0.1:80")).toBe(false);
    expect(addressesIn([])("127.0.0.1")).toBe(false);
  });
});

describe("ipv6Groups: the eight groups of an IPv6 address", () => {
  test("compressed, in full, with a dotted IPv4 tail, with a zone", () => {
    expect(ipv6Groups("2001:db8::1")).toEqual([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]);
    expect(ipv6Groups("2002:0A00:0001:0:0:0:0:0")).toEqual([0x2002, 0xa00, 1, 0, 0, 0, 0, 0]);
    expect(ipv6Groups("::ffff:10.0.0.1")).toEqual([0, 0, 0, 0, 0, 0xffff, 0xa00, 1]);
    expect(ipv6Groups("::")).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect(ipv6Groups("fe80::1%eth0")).toEqual([0xfe80, 0, 0, 0, 0, 0, 0, 1]);
  });

  test("not an IPv6 address: undefined", () => {
    for (const text of ["10.0.0.1", "1::2::3", "[2001:db8::1]", "unknown"]) expect(ipv6Groups(text)).toBeUndefined();
  });

  test("ipv4In: two groups as a dotted IPv4 address", () => {
    expect(ipv4In(0x0a00, 0x0001)).toBe("10.0.0.1");
    expect(ipv4In(0xc0a8, 0xffff)).toBe("192.168.255.255");
  });
});
