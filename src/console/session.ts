/**
 * Who is signed in: an environment and its API key, kept in this tab's session storage. Never in a URL (which
 * ends up in logs and history) nor in a cookie (which the browser would send by itself, the door to CSRF): the
 * console sends the key itself, in the Api-Key header, as every client does. Closing the tab forgets it.
 */
export type Session = { environment: string; apiKey: string };

const storageKey = "importd.session";

export function currentSession(): Session | undefined {
  try {
    const stored = JSON.parse(sessionStorage.getItem(storageKey) ?? "null") as Session | null;
    return stored && typeof stored.environment === "string" && typeof stored.apiKey === "string" ? stored : undefined;
  } catch {
    return undefined;
  }
}

export function keepSession(session: Session): void {
  sessionStorage.setItem(storageKey, JSON.stringify(session));
}

export function endSession(): void {
  sessionStorage.removeItem(storageKey);
}
