import { useEffect, useState } from "preact/hooks";

/**
 * Where the console is, from the URL's fragment (#/jobs, #/jobs/12, #/records/assets): the server serves one page at
 * /console, and the back button, reloads and links work without it knowing the console's screens.
 */
export type Route = { screen: "jobs" } | { screen: "job"; id: number } | { screen: "records"; resource?: string };

export function parseRoute(hash: string): Route {
  const [screen, argument] = hash.replace(/^#\/?/, "").split("/");
  if (screen === "jobs" && argument && /^[1-9]\d*$/.test(argument)) return { screen: "job", id: Number(argument) };
  if (screen === "records") return { screen: "records", resource: argument || undefined };
  return { screen: "jobs" };
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
