import { createClient, type ImportdClient } from "../client";
import type { Session } from "./session";

/**
 * The public API's client, the one `importd import` and the CLI use, on this page's own server: the console calls
 * nothing else. One retry only: a person watching a page is better told at once that importd does not answer.
 */
export function clientFor(session: Session): ImportdClient {
  return createClient({ baseUrl: `${location.origin}/${encodeURIComponent(session.environment)}`, apiKey: session.apiKey, retries: 1, backoffMs: 200 });
}
