import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { connect as connectTls } from "node:tls";
import { testTls } from "./backend";

export type RawResponse = { status: number; headers: Record<string, string>; body: string; raw: string };

/**
 * Writes `request` byte for byte on a new TCP connection and reads the answer until the server closes it
 * (send `Connection: close`, or HTTP/1.0). For what fetch() cannot send: no Host, odd Hosts, absolute-form targets.
 */
export function rawRequest(port: number, request: string, timeoutMs = 10_000, { halfClose = false } = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    // halfClose: the request, then the end of what this side sends (`nc -N`, shutdown(SHUT_WR)), reading on until
    // the server closes.
    const send = () => (halfClose ? socket.end(request) : socket.write(request));
    // Over TLS (TEST_TRANSPORT=tls), the same bytes inside a TLS connection, its certificate checked.
    const socket = testTls
      ? connectTls({ port, host: "127.0.0.1", ca: readFileSync(testTls.ca) }, send)
      : connect(port, "127.0.0.1", send);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete answer within ${timeoutMs} ms to ${JSON.stringify(request.slice(0, 200))}`));
    }, timeoutMs);
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(parseRaw(Buffer.concat(chunks).toString("latin1")));
    });
  });
}

function parseRaw(raw: string): RawResponse {
  const split = raw.indexOf("\r\n\r\n");
  const head = (split === -1 ? raw : raw.slice(0, split)).split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? "")?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const line of head.slice(1)) {
    const colon = line.indexOf(":");
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status, headers, body: split === -1 ? "" : raw.slice(split + 4), raw };
}

export type OpenRequest = {
  /**
   * Sends more of the request (its body, a piece at a time); nothing once the server has closed. Resolves once the
   * bytes have been handed to the system (or could not be).
   */
  write(bytes: string | Uint8Array): Promise<void>;
  /** Whatever the server answered, once it has closed the connection (or the client has, with `close`). */
  answer: Promise<RawResponse>;
  /** The first whole answer (head and Content-Length body), as soon as it has arrived; or, closed before, what did. */
  response: Promise<RawResponse>;
  /** Whether a whole answer has arrived. */
  readonly answered: boolean;
  /** Whether the server has closed the connection. */
  readonly closed: boolean;
  /** Ends the connection from this side, as a client that goes away does. */
  close(): void;
};

/**
 * A request sent piece by piece on a connection of its own (over TLS when the tests run over TLS): the head at once,
 * the body as the test writes it, so that a test can stall or trickle a body. Errors from writing after the server
 * closed are the point of such tests, and are not errors here.
 */
export async function openRequest(port: number, head: string): Promise<OpenRequest> {
  const chunks: Buffer[] = [];
  let closed = false;
  const socket = await new Promise<ReturnType<typeof connect>>((resolve, reject) => {
    const opened: ReturnType<typeof connect> = testTls
      ? connectTls({ port, host: "127.0.0.1", ca: readFileSync(testTls.ca) }, () => resolve(opened))
      : connect(port, "127.0.0.1", () => resolve(opened));
    opened.once("error", reject);
  });
  socket.on("error", () => {});
  let answered = false;
  let respond: (response: RawResponse) => void = () => {};
  const response = new Promise<RawResponse>((resolve) => (respond = resolve));
  socket.on("data", (chunk: Buffer) => {
    chunks.push(chunk);
    if (answered) return;
    const raw = Buffer.concat(chunks).toString("latin1");
    const parsed = parseRaw(raw);
    const length = Number(parsed.headers["content-length"] ?? Number.NaN);
    if (parsed.status > 0 && raw.includes("\r\n\r\n") && Buffer.byteLength(parsed.body, "latin1") >= length) {
      answered = true;
      respond(parsed);
    }
  });
  socket.on("close", () => respond(parseRaw(Buffer.concat(chunks).toString("latin1"))));
  const answer = new Promise<RawResponse>((resolve) =>
    socket.on("close", () => {
      closed = true;
      resolve(parseRaw(Buffer.concat(chunks).toString("latin1")));
    }),
  );
  socket.write(head);
  return {
    write: (bytes) =>
      new Promise<void>((resolve) => {
        if (closed || socket.destroyed) return resolve();
        socket.write(bytes, () => resolve());
      }),
    answer,
    response,
    get answered() {
      return answered;
    },
    get closed() {
      return closed;
    },
    close: () => void socket.destroy(),
  };
}
