import { ImportdConnectionError, ImportdProblem } from "../client";

/**
 * What went wrong, in words a person can act on. `environment`: the one signed in to, which a refused key is
 * about. The server's own Problem Details already say what was wrong with a request; this adds what the console
 * knows and the server cannot (that the person may have mistyped the environment, that importd may be stopping).
 */
export function problemText(error: unknown, environment?: string): string {
  if (error instanceof ImportdProblem) {
    if (error.status === 401) {
      return `The API key was refused: it is wrong, or it is not a key of the environment '${environment ?? "?"}'. Check both and sign in again.`;
    }
    if (error.status === 404) return `Not found: ${error.detail ?? error.title}`;
    if (error.status === 413) return `Too big for this server: ${error.detail ?? error.title}`;
    if (error.status === 429) {
      const wait = error.retryAfterSeconds === undefined ? "a minute" : `${Math.ceil(error.retryAfterSeconds)} s`;
      return `Too many wrong API keys came from this address: importd checks none for now. Wait ${wait}, then sign in again.`;
    }
    if (error.status === 503) return `importd is stopping or not ready yet: ${error.detail ?? error.title}. Try again in a moment.`;
    return error.detail ? `${error.title} ${error.detail}` : error.title;
  }
  if (error instanceof ImportdConnectionError || error instanceof TypeError) {
    return "importd does not answer: it may be stopped or restarting, or the network is down. The console tries again when you do.";
  }
  return (error as Error)?.message ?? String(error);
}
