type Route = { method: string; path: string };

/**
 * The methods a path answers, by the app's routes (`/:env/v2/status/:id`; a `:name` segment matches any one
 * segment), so that a method the path does not answer is a 405 listing them in Allow (RFC 9110 15.5.6), not a
 * 404; undefined when no route has the path. A GET route answers HEAD too, as Bun serves it.
 */
export function allowedMethods(routes: readonly Route[]): (path: string) => string[] | undefined {
  const patterns = routes.map(({ method, path }) => ({ method, segments: path.split("/") }));
  const matches = (segments: string[], pattern: string[]) =>
    segments.length === pattern.length && pattern.every((part, i) => (part.startsWith(":") ? segments[i] !== "" : part === segments[i]));
  return (path) => {
    const segments = path.split("/");
    const methods = new Set(patterns.filter((pattern) => matches(segments, pattern.segments)).flatMap(({ method }) => (method === "GET" ? ["GET", "HEAD"] : [method])));
    return methods.size === 0 ? undefined : [...methods].sort();
  };
}
