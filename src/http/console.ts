// The console's page: Bun bundles it with its script (Preact, the public API's client) and stylesheet, when the
// server starts from source and, at `bun build --compile`, into the executable. Nothing comes from a CDN.
import type { Server } from "bun";
import consolePage from "../console/index.html";
import { consolePolicy, pageHeaders } from "./security-headers";

// The bundle's files, which Bun names itself (`/chunk-1a2b3c.js`): one path segment with a file's extension, which
// no API path has.
const bundledFile = /^\/[A-Za-z0-9._-]+\.(?:js|css|map|svg|png|ico|woff2?)$/;

/**
 * The console's page and its bundled files. Bun answers an HTML bundle only as a route of a server of its own, and
 * lets nothing add headers to those answers; so the bundle is served by a second Bun server, on an abstract Unix
 * socket no file names (and which vanishes with the process), and its answers pass through importd's with the
 * page's Content-Security-Policy. What it serves is public (the console needs no key until one is typed in).
 */
export class ConsoleFiles {
  private constructor(
    private readonly bundle: Server<undefined>,
    private readonly socket: string,
  ) {}

  static open(): ConsoleFiles {
    const socket = `\0importd-console-${process.pid}-${crypto.randomUUID()}`;
    const bundle = Bun.serve({
      unix: socket,
      development: false,
      routes: { "/console": consolePage, "/console/": consolePage },
      fetch: () => new Response(null, { status: 404 }),
    }) as Server<undefined>;
    return new ConsoleFiles(bundle, socket);
  }

  /** Whether `path` may be one of the console's: answered here, or else by the API as usual. */
  serves(method: string, path: string): boolean {
    return (method === "GET" || method === "HEAD") && (path === "/console" || path === "/console/" || bundledFile.test(path));
  }

  /** The console's answer to `request`; undefined when it has no such file. */
  async fetch(request: Request, path: string): Promise<Response | undefined> {
    const answer = await fetch(`http://console${path}`, { unix: this.socket, method: request.method, headers: pickHeaders(request.headers), redirect: "manual" });
    if (answer.status === 404) return undefined;
    const headers = new Headers(answer.headers);
    for (const [name, value] of Object.entries(pageHeaders(consolePolicy))) headers.set(name, value);
    return new Response(answer.body, { status: answer.status, headers });
  }

  stop(): Promise<void> {
    return this.bundle.stop(true);
  }
}

// Only what makes a cached file come back as 304.
const pickHeaders = (from: Headers) => {
  const picked = new Headers();
  for (const name of ["if-none-match", "if-modified-since"]) {
    const value = from.get(name);
    if (value !== null) picked.set(name, value);
  }
  return picked;
};
