/**
 * The headers that tell a browser how little to allow importd's pages (the console, Swagger UI) and answers.
 * Every page is served from importd itself (no CDN), so its policy names this origin only.
 */

// A year, as Mozilla's guidelines recommend. No includeSubDomains: the appliance's name may share a domain with
// hosts that importd knows nothing of. Browsers ignore it over a connection whose certificate they do not trust,
// so a self-signed certificate not yet trusted is not made impossible to accept by it.
export const strictTransportSecurity = "max-age=31536000";

const commonPolicy = ["default-src 'self'", "object-src 'none'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'"];

/**
 * The console: its script (which also runs as its import Web Worker), its stylesheet and its API calls, all from
 * this origin; downloads are blob: links, which a policy does not govern.
 */
export const consolePolicy = [...commonPolicy, "script-src 'self'", "worker-src 'self'", "style-src 'self'", "img-src 'self' data:", "connect-src 'self'"].join("; ");

/**
 * Swagger UI: no script but its own files (its start-up script is one). Inline styles are allowed, as its views
 * (syntax highlighting among them) may write them; a style cannot run code. Its icons are data: images.
 */
export const swaggerPolicy = [...commonPolicy, "script-src 'self'", "style-src 'self' 'unsafe-inline'", "img-src 'self' data:", "connect-src 'self'"].join("; ");

/** Headers of every answer: no type sniffing, and over HTTPS, HTTPS only from now on. */
export function answerHeaders(tls: boolean): Record<string, string> {
  return { "x-content-type-options": "nosniff", ...(tls ? { "strict-transport-security": strictTransportSecurity } : {}) };
}

/** Headers of a page (and its files): the answer's, plus its policy, no framing and no Referer sent onwards. */
export function pageHeaders(policy: string): Record<string, string> {
  return { "content-security-policy": policy, "referrer-policy": "no-referrer", "x-frame-options": "DENY" };
}

/**
 * `response` with `headers` added where it does not have them already. A Response from fetch() (the console's
 * files) has headers that cannot be changed: it is copied then.
 */
export function withHeaders(response: Response, headers: Record<string, string>): Response {
  try {
    for (const [name, value] of Object.entries(headers)) if (!response.headers.has(name)) response.headers.set(name, value);
    return response;
  } catch {
    const copy = new Response(response.body, response);
    for (const [name, value] of Object.entries(headers)) if (!copy.headers.has(name)) copy.headers.set(name, value);
    return copy;
  }
}
