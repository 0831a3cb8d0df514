import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers/server";

// Every request here comes from 127.0.0.1; X-Forwarded-For says who it claims to be for.
const wrongKey = `${"0".repeat(64)}_1`;
const get = (server: TestServer, key: string, forwardedFor?: string) =>
  fetch(`${server.base}/v2/jobs`, { headers: { "api-key": key, ...(forwardedFor ? { "x-forwarded-for": forwardedFor } : {}) } });
// The API's requests only (the test server's answers are checked against /swagger/json, which it fetches too).
const loggedClients = (server: TestServer) => server.logs.filter((entry) => entry.msg === "request" && String(entry.path).includes("/v2/")).map((entry) => entry.client);

describe("behind a trusted reverse proxy (--trusted-proxies 127.0.0.1/32)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ trustedProxies: ["127.0.0.1/32"], authFailuresPerMinute: 3 });
  });
  afterAll(() => server.close());

  test("the request log names the client the proxy forwarded for, the rightmost untrusted address", async () => {
    await get(server, server.key, "198.51.100.20");
    await get(server, server.key, "6.6.6.6, 198.51.100.21");
    await get(server, server.key);
    expect(loggedClients(server).slice(-3)).toEqual(["198.51.100.20", "198.51.100.21", "127.0.0.1"]);
  });

  test("the failed-key limit counts each forwarded client apart: one client's mistakes do not throttle the others", async () => {
    for (let i = 0; i < 3; i++) expect((await get(server, wrongKey, "198.51.100.1")).status).toBe(401);
    expect((await get(server, server.key, "198.51.100.1")).status).toBe(429);
    // Another client behind the same proxy is not held up.
    expect((await get(server, server.key, "198.51.100.2")).status).toBe(200);
    // Nor is a client that puts the throttled address further left in its own header.
    expect((await get(server, server.key, "198.51.100.1, 198.51.100.3")).status).toBe(200);
  });

  test("an entry with a port, or an IPv6 one in brackets, is the client's address: logged as it, and counted with it", async () => {
    const before = loggedClients(server).length;
    expect((await get(server, wrongKey, "198.51.100.30:5678")).status).toBe(401);
    expect((await get(server, wrongKey, "198.51.100.30:443")).status).toBe(401);
    expect((await get(server, wrongKey, "198.51.100.30")).status).toBe(401);
    expect((await get(server, server.key, "198.51.100.30:80")).status).toBe(429);
    expect((await get(server, wrongKey, "[2001:db8:30::1]:443")).status).toBe(401);
    expect((await get(server, server.key, "[2001:db8:30::1]")).status).toBe(200);
    expect(loggedClients(server).slice(before)).toEqual(["198.51.100.30", "198.51.100.30", "198.51.100.30", "198.51.100.30", "2001:db8:30::1", "2001:db8:30::1"]);
  });

  test("IPv6 clients count per /64: another address of the same /64 is refused, another /64 is not; the log has each full address", async () => {
    const before = loggedClients(server).length;
    for (const address of ["2001:db8:40:1::1", "2001:db8:40:1::2", "2001:db8:40:1:aaaa:bbbb:cccc:dddd"]) expect((await get(server, wrongKey, address)).status).toBe(401);
    expect((await get(server, server.key, "2001:db8:40:1:ffff::9")).status).toBe(429);
    expect((await get(server, server.key, "2001:db8:40:2::1")).status).toBe(200);
    expect(loggedClients(server).slice(before)).toEqual(["2001:db8:40:1::1", "2001:db8:40:1::2", "2001:db8:40:1:aaaa:bbbb:cccc:dddd", "2001:db8:40:1:ffff::9", "2001:db8:40:2::1"]);
  });

  test("an IPv4 client counts the same whether the proxy writes its address as IPv4 or as IPv6 (::ffff:a.b.c.d)", async () => {
    for (const address of ["198.51.100.50", "::ffff:198.51.100.50", "198.51.100.50"]) expect((await get(server, wrongKey, address)).status).toBe(401);
    expect((await get(server, server.key, "::ffff:198.51.100.50")).status).toBe(429);
    expect((await get(server, server.key, "::ffff:198.51.100.51")).status).toBe(200);
  });
});

describe("by default (--trusted-proxies loopback): a proxy on this machine is believed", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ authFailuresPerMinute: 3 });
  });
  afterAll(() => server.close());

  test("each client the proxy forwards for is logged and limited on its own; this machine's own requests too", async () => {
    for (let i = 0; i < 3; i++) expect((await get(server, wrongKey, "198.51.100.1")).status).toBe(401);
    expect((await get(server, server.key, "198.51.100.1")).status).toBe(429);
    expect((await get(server, server.key, "198.51.100.2")).status).toBe(200);
    expect((await get(server, server.key)).status).toBe(200);
    // This machine's own (no X-Forwarded-For) is a client like any other: limited, without holding up the others.
    for (let i = 0; i < 3; i++) expect((await get(server, wrongKey)).status).toBe(401);
    expect((await get(server, server.key)).status).toBe(429);
    expect((await get(server, server.key, "198.51.100.3")).status).toBe(200);
    expect(loggedClients(server)).toEqual([
      ...Array(4).fill("198.51.100.1"),
      "198.51.100.2",
      ...Array(5).fill("127.0.0.1"),
      "198.51.100.3",
    ]);
  });
});

describe("--trusted-proxies none", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ trustedProxies: [], authFailuresPerMinute: 3 });
  });
  afterAll(() => server.close());

  test("a spoofed X-Forwarded-For changes nothing: the log has the TCP peer, and the limit counts the peer, this machine included", async () => {
    for (const spoofed of ["198.51.100.1", "198.51.100.2", "198.51.100.3"]) expect((await get(server, wrongKey, spoofed)).status).toBe(401);
    expect(loggedClients(server)).toEqual(["127.0.0.1", "127.0.0.1", "127.0.0.1"]);
    // A fourth "client" is the same peer: refused, whatever it claims.
    expect((await get(server, server.key, "198.51.100.4")).status).toBe(429);
  });
});
