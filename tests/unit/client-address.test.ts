import { describe, expect, test } from "bun:test";
import { clientAddress, clientAddressOf, forwardedAddress, rememberClientAddress, trustedProxies } from "../../src/http/client-address";

describe("trustedProxies: which peers are reverse proxies", () => {
  const trusted = trustedProxies(["10.0.0.0/8", "192.168.1.7", "fd00::/8", "::1"]);

  test("IPv4 ranges and single addresses", () => {
    expect(trusted("10.200.3.4")).toBe(true);
    expect(trusted("192.168.1.7")).toBe(true);
    expect(trusted("192.168.1.8")).toBe(false);
    expect(trusted("11.0.0.1")).toBe(false);
  });

  test("IPv6 ranges and single addresses", () => {
    expect(trusted("fd12:3456::1")).toBe(true);
    expect(trusted("::1")).toBe(true);
    expect(trusted("fe80::1")).toBe(false);
  });

  test("an IPv4 address as a dual-stack socket reports it (::ffff:a.b.c.d) matches its IPv4 range", () => {
    expect(trusted("::ffff:10.1.2.3")).toBe(true);
    expect(trusted("::ffff:11.1.2.3")).toBe(false);
  });

  test("what is not an address is never trusted", () => {
    expect(trusted("unknown")).toBe(false);
    expect(trusted("10.0.0.1:80")).toBe(false);
  });

  test("no ranges: nobody is trusted", () => {
    expect(trustedProxies([])("127.0.0.1")).toBe(false);
  });
});

describe("clientAddressOf: the rightmost X-Forwarded-For address that is not a trusted proxy", () => {
  const trusted = trustedProxies(["10.0.0.0/8"]);

  test("an untrusted peer's X-Forwarded-For is ignored: a spoofed header changes nothing", () => {
    expect(clientAddressOf("203.0.113.5", "198.51.100.1", trusted)).toBe("203.0.113.5");
    expect(clientAddressOf("203.0.113.5", "10.0.0.1, 198.51.100.1", trusted)).toBe("203.0.113.5");
  });

  test("a trusted peer without the header is the client itself", () => {
    expect(clientAddressOf("10.0.0.2", null, trusted)).toBe("10.0.0.2");
  });

  test("behind one proxy, the address it appended", () => {
    expect(clientAddressOf("10.0.0.2", "198.51.100.1", trusted)).toBe("198.51.100.1");
  });

  test("what the client wrote itself, left of the appended address, is not believed", () => {
    expect(clientAddressOf("10.0.0.2", "1.2.3.4, 198.51.100.1", trusted)).toBe("198.51.100.1");
    expect(clientAddressOf("10.0.0.2", "10.9.9.9, 198.51.100.1", trusted)).toBe("198.51.100.1");
  });

  test("behind a chain of trusted proxies, the first untrusted hop from the right", () => {
    expect(clientAddressOf("10.0.0.2", "198.51.100.1, 10.0.0.3,10.0.0.4", trusted)).toBe("198.51.100.1");
  });

  test("a chain of trusted proxies only: the leftmost of them", () => {
    expect(clientAddressOf("10.0.0.2", "10.0.0.3, 10.0.0.4", trusted)).toBe("10.0.0.3");
  });

  test("a hop that is not an address ends the chain at the last vouched-for hop", () => {
    expect(clientAddressOf("10.0.0.2", "198.51.100.1, <script>", trusted)).toBe("10.0.0.2");
    expect(clientAddressOf("10.0.0.2", "garbage, 10.0.0.3", trusted)).toBe("10.0.0.3");
    expect(clientAddressOf("10.0.0.2", "", trusted)).toBe("10.0.0.2");
  });

  test("a hop with a port, or an IPv6 one in brackets, is read as its address", () => {
    expect(clientAddressOf("10.0.0.2", "198.51.100.1:5678", trusted)).toBe("198.51.100.1");
    expect(clientAddressOf("10.0.0.2", "[2001:db8::1]:443", trusted)).toBe("2001:db8::1");
    expect(clientAddressOf("10.0.0.2", "[2001:db8::1]", trusted)).toBe("2001:db8::1");
    // A trusted proxy written with its port is still trusted: the client is left of it.
    expect(clientAddressOf("10.0.0.2", "198.51.100.1, 10.0.0.3:443", trusted)).toBe("198.51.100.1");
  });

  test("IPv6 hops", () => {
    const v6 = trustedProxies(["fd00::/8"]);
    expect(clientAddressOf("fd00::2", "2001:db8::7, fd00::3", v6)).toBe("2001:db8::7");
  });
});

describe("clientAddress: worked out once per request, from the peer the server saw", () => {
  const trusted = trustedProxies(["127.0.0.0/8", "::1"]);
  const of = (peer: string, forwardedFor: string | null = null) => {
    const request = new Request("http://localhost/default/v2/jobs");
    rememberClientAddress(request, peer, () => clientAddressOf(peer, forwardedFor, trusted));
    return clientAddress(request);
  };

  test("a loopback peer is the client itself, unless it forwards for another: this machine is a client like any other", () => {
    expect([of("127.0.0.1"), of("::1"), of("::ffff:127.0.0.1")]).toEqual(["127.0.0.1", "::1", "::ffff:127.0.0.1"]);
    expect([of("127.0.0.1", "203.0.113.7"), of("::1", "[2001:db8::7]:443")]).toEqual(["203.0.113.7", "2001:db8::7"]);
  });

  test("a request the server did not see arrive (no peer known) is 'unknown'", () => {
    expect(clientAddress(new Request("http://localhost/"))).toBe("unknown");
  });
});

describe("forwardedAddress: the address in one X-Forwarded-For entry", () => {
  test("a bare address, IPv4 or IPv6, as it is (spaces around dropped)", () => {
    expect([forwardedAddress(" 203.0.113.7 "), forwardedAddress("2001:db8::1"), forwardedAddress("::ffff:203.0.113.7")]).toEqual(["203.0.113.7", "2001:db8::1", "::ffff:203.0.113.7"]);
  });

  test("an IPv4 address with a port, an IPv6 one in brackets with or without a port", () => {
    expect(forwardedAddress("1.2.3.4:5678")).toBe("1.2.3.4");
    expect(forwardedAddress("[2001:db8::1]:443")).toBe("2001:db8::1");
    expect(forwardedAddress("[2001:db8::1]")).toBe("2001:db8::1");
    expect(forwardedAddress("[::ffff:1.2.3.4]:80")).toBe("::ffff:1.2.3.4");
  });

  test("anything else holds no address", () => {
    for (const entry of ["", "unknown", "proxy.example:80", "[1.2.3.4]:80", "[2001:db8::1]:", "[2001:db8::1]:123456", "1.2.3.4:", "1.2.3.4:80:80", "1.2.3:80", "0x7f000001:80", "[2001:db8::1", "2001:db8::1]:443", "_hidden", "<script>"]) {
      expect({ entry, address: forwardedAddress(entry) }).toEqual({ entry, address: undefined });
    }
  });
});
