/**
 * What a request asks for, by its path alone. Bun builds `request.url` from the Host header: without one
 * (HTTP/1.0, as HAProxy's default health check sends), or with one it cannot parse (`a b`, `u:pw@h`),
 * the URL is only the path (`/healthz`); an absolute-form target (`GET http://x/healthz`) takes the Host
 * header's name instead of its own. Nothing in importd depends on the host, so routing and logging look
 * at the path only.
 */

/** The path of a request URL (absolute, or only a path), without its query (cheaper than new URL()). */
export function pathOf(url: string): string {
  const start = url.startsWith("/") ? 0 : url.indexOf("/", url.indexOf("//") + 2);
  if (start === -1) return "/";
  // Searched for, not matched: every request asks, some of them several times.
  const query = url.indexOf("?", start);
  const fragment = url.indexOf("#", start);
  const end = query === -1 ? fragment : fragment === -1 ? query : Math.min(query, fragment);
  return end === -1 ? url.slice(start) : url.slice(start, end);
}

// Any name works: it is never shown or used, only parsed past; long enough for the router (below).
const placeholderOrigin = "http://importd";

// Elysia's router looks for the path from the 12th character of the URL on: after "http://" and a host of at least
// four characters, or "https://" and three.
const routerPathStart = 11;

/**
 * The request as the router needs it: an absolute URL whose path starts where the router looks for it. Bun's URL is
 * absolute whenever the Host header parses, and then the request itself goes on: a copy costs a status poll's
 * routing, and the copy's body stream no longer lets a 413 go out before a chunked body has all arrived. Only a
 * path-only URL, or one with a host too short for the router (`Host: a`), is given an origin.
 */
export function routable(request: Request): Request {
  const url = request.url;
  if (url.startsWith("/")) return new Request(placeholderOrigin + url, request);
  const pathStart = url.indexOf("/", url.indexOf("//") + 2);
  if (pathStart >= routerPathStart) return request;
  return new Request(placeholderOrigin + (pathStart === -1 ? "/" : url.slice(pathStart)), request);
}
