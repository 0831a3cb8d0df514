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
  const end = url.slice(start).search(/[?#]/);
  return end === -1 ? url.slice(start) : url.slice(start, start + end);
}

// Any name works: it is never shown or used, only parsed past.
const placeholderOrigin = "http://importd";

/**
 * The request as the router needs it: an absolute http:// URL. Bun's URL is absolute whenever the Host header
 * parses, so a plain HTTP request itself goes on (copying one costs a status poll's routing); only a path-only
 * URL is given an origin. The app is built with Elysia's `standardHostname: false`, so that a host shorter than
 * four characters (`Host: a`) does not shift where the router thinks the path starts: it then looks for the path
 * from the 8th character on, which in "https://" is still the scheme's, so over TLS the URL is read as http://.
 */
export function routable(request: Request): Request {
  const url = request.url;
  if (url.startsWith("/")) return new Request(placeholderOrigin + url, request);
  if (url.startsWith("https://")) return new Request(`http://${url.slice(8)}`, request);
  return request;
}
