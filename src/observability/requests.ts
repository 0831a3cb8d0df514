import { clientAddress } from "../http/client-address";
import { pathOf } from "../http/request-target";
import type { Log } from "../log";
import type { Metrics } from "./metrics";

type Handler = (request: Request) => Response | Promise<Response>;

const maxLoggedPath = 200;
const apiPath = /^\/([^/]+)\/v2\/(?:status\/(\d+))?/;

export type ObservedHandler = {
  fetch: Handler;
  /** Resolves once no request is being handled (a stop waits for this, not for idle connections). */
  idle(): Promise<void>;
};

/**
 * Wraps the app's fetch so that every answered request is one log line and one count: method, path
 * (never the query, never a header, so never a key), status, duration, environment, and the job
 * it named (the status URL) or created (the Location of a 202), and the client's address (behind a trusted
 * proxy, the one it forwarded for). It also counts requests in flight.
 */
export function observeRequests(handle: Handler, log: Log, metrics: Metrics): ObservedHandler {
  let inFlight = 0;
  const idleWaiters: Array<() => void> = [];
  const fetch: Handler = async (request) => {
    inFlight++;
    const started = performance.now();
    let status = 500;
    let location: string | null = null;
    try {
      const response = await handle(request);
      status = response.status;
      // Only a 202 names the job it created.
      if (status === 202) location = response.headers.get("location");
      return response;
    } finally {
      // Counted out first: a request whose log line failed must not keep a stop waiting for it.
      if (--inFlight === 0) for (const resolve of idleWaiters.splice(0)) resolve();
      const path = pathOf(request.url);
      const match = apiPath.exec(path);
      const jobId = match?.[2] ?? (location ? /\/status\/(\d+)$/.exec(location)?.[1] : undefined);
      metrics.requestAnswered(request.method, status);
      log({
        level: status >= 500 ? "error" : "info",
        msg: "request",
        method: request.method,
        path: path.length > maxLoggedPath ? `${path.slice(0, maxLoggedPath)}…` : path,
        status,
        durationMs: Math.round((performance.now() - started) * 10) / 10,
        client: clientAddress(request),
        ...(match ? { environment: match[1]!.slice(0, 100) } : {}),
        ...(jobId ? { jobId: Number(jobId) } : {}),
      });
    }
  };
  return {
    fetch,
    idle: () => (inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.push(resolve))),
  };
}
