// An HTTP proxy in front of a test server that lets the first requests of a kind through and holds the rest until
// the test releases them: what must stay in flight (an import the page is still sending) is held by the test, not by
// how long the work takes, which a fast machine finishes before the test acts and a busy one only later.

export type HeldRequests = {
  /** The proxy's origin: give it to the client instead of the server's. */
  url: string;
  /** Requests the gate holds at this moment. */
  held(): number;
  /** Lets `passing` more requests that `matches` through, and holds every one after them until `release()`. */
  holdAfter(passing: number, matches: (request: Request) => boolean): void;
  /** Lets every held request go on, and all later ones through. */
  release(): void;
  close(): void;
};

/** Plain HTTP on loopback, to `target` (which may be HTTPS): the test's browser or client talks to it instead. */
export function heldRequests(target: string): HeldRequests {
  let gate: { passing: number; matches: (request: Request) => boolean; open: Promise<void>; release: () => void } | undefined;
  let waiting = 0;
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    idleTimeout: 0,
    async fetch(request) {
      const here = new URL(request.url);
      if (gate?.matches(request) && gate.passing-- <= 0) {
        // A request its client gave up on (a page reloaded, an import stopped) is not sent on: the server never sees it.
        const gone = new Promise<"gone">((resolve) => request.signal.addEventListener("abort", () => resolve("gone"), { once: true }));
        waiting++;
        const outcome = await Promise.race([gate.open, gone]);
        waiting--;
        if (outcome === "gone") return new Response(null, { status: 499 });
      }
      const headers = new Headers(request.headers);
      headers.delete("host");
      const body = request.method === "GET" || request.method === "HEAD" ? undefined : await request.arrayBuffer();
      const answer = await fetch(`${target}${here.pathname}${here.search}`, { method: request.method, headers, body, redirect: "manual", signal: request.signal });
      const answerHeaders = new Headers(answer.headers);
      for (const name of ["content-encoding", "content-length", "transfer-encoding"]) answerHeaders.delete(name);
      return new Response(await answer.arrayBuffer(), { status: answer.status, headers: answerHeaders });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    held: () => waiting,
    holdAfter(passing, matches) {
      gate?.release();
      let release = () => {};
      const open = new Promise<void>((resolve) => (release = resolve));
      gate = { passing, matches, open, release };
    },
    release() {
      gate?.release();
      gate = undefined;
    },
    close() {
      gate?.release();
      server.stop(true);
    },
  };
}
