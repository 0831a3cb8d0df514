// A database URL as it may be shown: without its passwords. Apart from the driver (connection.ts), so that what shows
// where the store is (a log line, a CLI message) does not load PostgreSQL's driver on an appliance that has none.

// Where libpq and node-postgres take a password from in a URL besides its user part: `?password=` (and the TLS
// key's `?sslpassword=`).
const secretParameter = /password/i;

/**
 * The URL as it may be shown, in every message and log line: without a password, neither in its user part nor in
 * its query (`?password=`). The one function that shows a database URL.
 */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    // Rewritten by hand, not through searchParams: that would re-encode every other parameter.
    const query = parsed.search.replace(/([?&])([^=&]*)=([^&]*)/g, (whole, separator: string, name: string) =>
      secretParameter.test(decodeURIComponentSafe(name)) ? `${separator}${name}=***` : whole,
    );
    return `${parsed.protocol}//${parsed.username ? `${parsed.username}${parsed.password ? `:${parsed.password}` : ""}@` : ""}${parsed.host}${parsed.pathname}${query}${parsed.hash}`;
  } catch {
    return "(a database URL that cannot be parsed)";
  }
}

/** The passwords `url` holds (its user part's and its query's), as written and decoded. */
function secretsOf(url: string): string[] {
  try {
    const parsed = new URL(url);
    const secrets = [parsed.password, ...[...parsed.searchParams].filter(([name]) => secretParameter.test(name)).map(([, value]) => value)];
    return [...new Set(secrets.flatMap((secret) => [secret, decodeURIComponentSafe(secret), encodeURIComponent(secret)]))].filter((secret) => secret !== "");
  } catch {
    return [];
  }
}

/**
 * `text` (a driver's message, say) with `url` shown redacted and any of its passwords replaced by ***: what reaches
 * a message or the log whenever a text may have been built from the URL.
 */
export function withoutSecrets(text: string, url: string): string {
  let clean = text.split(url).join(redactedUrl(url));
  // Longest first, so that a password that holds another is replaced whole.
  for (const secret of secretsOf(url).sort((a, b) => b.length - a.length)) clean = clean.split(secret).join("***");
  return clean;
}

const decodeURIComponentSafe = (text: string) => {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
};
