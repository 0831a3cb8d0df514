import { useEffect, useState } from "preact/hooks";

/**
 * Where the console is, from the URL's fragment (#/jobs?status=Failed, #/jobs/12, #/records/assets, #/import): the server serves
 * one page at /console, and the back button, reloads and shared links work without it knowing the console's screens.
 * The jobs list's filters are in it too, so that a filtered view can be sent to someone (who signs in to see it).
 */
export type JobFilters = { status: string; type: string; operation: string; dryRun: string };
export type Route = { screen: "jobs"; filters: JobFilters } | { screen: "job"; id: number } | { screen: "records"; resource?: string } | { screen: "import" };

export function parseRoute(hash: string): Route {
  const [path = "", query = ""] = hash.replace(/^#\/?/, "").split("?");
  const [screen, argument] = path.split("/");
  if (screen === "jobs" && argument && /^[1-9]\d*$/.test(argument)) return { screen: "job", id: Number(argument) };
  if (screen === "records") return { screen: "records", resource: argument || undefined };
  if (screen === "import") return { screen: "import" };
  const params = new URLSearchParams(query);
  return { screen: "jobs", filters: { status: params.get("status") ?? "", type: params.get("type") ?? "", operation: params.get("operation") ?? "", dryRun: params.get("dryRun") ?? "" } };
}

/** The jobs list with these filters (those left empty are not written). */
export function jobsHref(filters: JobFilters): string {
  const query = new URLSearchParams(Object.entries(filters).filter(([, value]) => value !== "")).toString();
  return `#/jobs${query ? `?${query}` : ""}`;
}

export const jobHref = (id: number) => `#/jobs/${id}`;

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const changed = () => setRoute(parseRoute(location.hash));
    addEventListener("hashchange", changed);
    return () => removeEventListener("hashchange", changed);
  }, []);
  return route;
}
