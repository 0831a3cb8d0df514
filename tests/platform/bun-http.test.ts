import { afterAll, expect, test } from "bun:test";
import { connect } from "node:net";

// Minimal reproductions of what Bun.serve does at the HTTP edge that importd cannot change, without importd: each
// test asserts Bun's behaviour as it is today, so that a Bun upgrade that changes it fails here and the README's
// "HTTP edge: what Bun answers itself" can be corrected. The upstream reports are drafted in docs/platform.md.

let handled = 0;
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  development: false,
  async fetch(request) {
    handled++;
    const path = new URL(request.url).pathname;
    if (path === "/now") return new Response("now\n", { status: 202 });
    await request.text();
    await Bun.sleep(50);
    return new Response("later\n", { status: 202 });
  },
  error: () => (handled++, new Response("importd would answer here\n", { status: 500 })),
});
afterAll(() => server.stop(true));

/** Sends `bytes` on a new connection (then shuts the write side, with `halfClose`) and answers every byte that came back. */
function exchange(bytes: string, { halfClose = false } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = "";
    const socket = connect({ port: server.port!, host: "127.0.0.1", allowHalfOpen: true }, () => (halfClose ? socket.end(bytes) : socket.write(bytes)));
    socket.on("data", (chunk) => (got += chunk.toString("latin1")));
    socket.on("end", () => socket.end());
    socket.on("error", reject);
    socket.on("close", () => resolve(got));
  });
}

const request = (path: string, body = "{}") =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`;

test("a client's half-close after a whole request: an answer made before Bun reads the FIN is sent, one made after an await is dropped", async () => {
  expect(await exchange(request("/now"), { halfClose: true })).toStartWith("HTTP/1.1 202 ");
  expect(await exchange(request("/later"), { halfClose: true })).toBe("");
  // Without the half-close, the same request gets its answer.
  expect(await exchange(request("/later"))).toStartWith("HTTP/1.1 202 ");
});

test("Bun answers a missing Host (HTTP/1.1), oversized headers and a bad request line itself: no body, and neither fetch nor error() is called", async () => {
  const bare = (status: string) => `HTTP/1.1 ${status}\r\nConnection: close\r\n\r\n`;
  const before = handled;
  expect(await exchange("GET /now HTTP/1.1\r\nConnection: close\r\n\r\n")).toBe(bare("400 Bad Request"));
  const head = (size: number) => {
    const start = "GET /now HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: ";
    return `${start}${"a".repeat(size - start.length - 4)}\r\n\r\n`;
  };
  // The limit is on the whole request head: 16 KiB passes, one byte more does not.
  expect(await exchange(head(16_384))).toStartWith("HTTP/1.1 202 ");
  expect(await exchange(head(16_385))).toBe(bare("431 Request Header Fields Too Large"));
  expect(await exchange("GARBAGE\r\nHost: x\r\n\r\n")).toBe(bare("400 Bad Request"));
  expect(await exchange("GET /now HTTP/9.9\r\nHost: x\r\n\r\n")).toBe(bare("505 HTTP Version Not Supported"));
  // Only the 16 KiB request reached the handler.
  expect(handled - before).toBe(1);
});
