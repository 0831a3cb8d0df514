import type { FieldErrors } from "../resources/validate";
import { validationProblem, type Problem } from "./problem";

/**
 * A query parameter given twice (`?dryRun=true&dryRun=false`) is a 400 naming it: Elysia's parser keeps the last
 * value silently, so a client that meant a dry run would get a real import. Only the names a route reads are looked
 * at (its `query` schema), as a name no route reads is ignored however often it comes.
 */

type Route = { method: string; path: string; hooks?: { query?: unknown } };

/** The query parameters each route reads, by `METHOD path` as Elysia names the route (`GET /:env/v2/jobs`). */
export function queryNamesOf(routes: readonly Route[]): Map<string, ReadonlySet<string>> {
  const byRoute = new Map<string, ReadonlySet<string>>();
  for (const { method, path, hooks } of routes) {
    const properties = (hooks?.query as { properties?: Record<string, unknown> } | undefined)?.properties;
    if (properties && Object.keys(properties).length > 0) byRoute.set(`${method} ${path}`, new Set(Object.keys(properties)));
  }
  return byRoute;
}

/** A name as Elysia's parser reads it: `+` is a space, escapes decoded, a malformed one kept as it came. */
function decodedName(raw: string): string {
  const spaced = raw.includes("+") ? raw.replaceAll("+", " ") : raw;
  if (!spaced.includes("%")) return spaced;
  try {
    return decodeURIComponent(spaced);
  } catch {
    return spaced;
  }
}

/**
 * The 400 for the names of `names` that the query of `url` (from `queryStart`, just after the `?`) gives more than
 * once; undefined when none is.
 */
export function repeatedParameters(url: string, queryStart: number, names: ReadonlySet<string>): Problem | undefined {
  const hash = url.indexOf("#", queryStart);
  const end = hash === -1 ? url.length : hash;
  const counts = new Map<string, number>();
  for (let start = queryStart; start < end; ) {
    const ampersand = url.indexOf("&", start);
    const stop = ampersand === -1 || ampersand > end ? end : ampersand;
    const equals = url.indexOf("=", start);
    const name = decodedName(url.slice(start, equals === -1 || equals > stop ? stop : equals));
    if (names.has(name)) counts.set(name, (counts.get(name) ?? 0) + 1);
    start = stop + 1;
  }
  const errors: FieldErrors = {};
  for (const [name, count] of counts) if (count > 1) errors[name] = [`'${name}' was given ${count} times; give it once.`];
  return Object.keys(errors).length === 0 ? undefined : validationProblem(errors);
}
