import type { Log } from "../log";
import type { Metrics } from "../observability/metrics";
import { clientAddress } from "./client-address";
import { pathOf } from "./request-target";

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
 * proxy, the one it forwarded for), and whether the client had closed the connection before the answer (then not
 * delivered). It also counts requests in flight.
 */
export function observeRequests(handle: Handler, log: Log, metrics: Metrics): ObservedHandler {
  let inFlight = 0;
  const idleWaiters: Array<() => void> = [];
  /** `response` undefined: the handler failed, and Bun's error handler answers 500. */
  const answered = (request: Request, started: number, response: Response | undefined) => {
    // Counted out first: a request whose log line failed must not keep a stop waiting for it.
    if (--inFlight === 0) for (const resolve of idleWaiters.splice(0)) resolve();
    const status = response?.status ?? 500;
    // Only a 202 names the job it created.
    const location = status === 202 ? response!.headers.get("location") : null;
    const path = pathOf(request.url);
    const match = apiPath.exec(path);
    const jobId = match?.[2] ?? (location ? /\/status\/(\d+)$/.exec(location)?.[1] : undefined);
    metrics.requestAnswered(request.method, status);
    const entry: Parameters<Log>[0] = {
      level: status >= 500 ? "error" : "info",
      msg: "request",
      method: request.method,
      path: path.length > maxLoggedPath ? `${path.slice(0, maxLoggedPath)}…` : path,
      status,
      durationMs: Math.round((performance.now() - started) * 10) / 10,
      client: clientAddress(request),
    };
    if (match) entry.environment = match[1]!.slice(0, 100);
    if (jobId) entry.jobId = Number(jobId);
    // The client closed its connection before the answer was ready: Bun does not send it (README, "HTTP edge").
    if (request.signal.aborted) entry.closedByClient = true;
    log(entry);
  };
  // Not an async function: a status poll is short enough that one more promise per request shows.
  const fetch: Handler = (request) => {
    inFlight++;
    const started = performance.now();
    let answer: Response | Promise<Response>;
    try {
      answer = handle(request);
    } catch (error) {
      answered(request, started, undefined);
      throw error;
    }
    if (answer instanceof Response) {
      answered(request, started, answer);
      return answer;
    }
    return answer.then(
      (response) => {
        answered(request, started, response);
        return response;
      },
      (error) => {
        answered(request, started, undefined);
        throw error;
      },
    );
  };
  return {
    fetch,
    idle: () => (inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.push(resolve))),
  };
}
