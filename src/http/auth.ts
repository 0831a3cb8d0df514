import { Elysia } from "elysia";
import { clientAddress, fromThisMachine } from "./client-address";
import { tooManyFailedAttempts, unauthorized } from "./problem";
import type { Services } from "./services";

/**
 * The caller's environment, from the `{env}` path segment and the Api-Key header; a 401 or 429 Problem is thrown.
 * An address that has sent too many wrong keys gets 429 without its key being checked. This machine's own
 * clients are not limited (as fail2ban ignores 127.0.0.1 by default): they are on the appliance already, and a
 * proxy here that is not in --trusted-proxies would otherwise have every client it serves locked out by one.
 */
export async function authenticate(request: Request, slug: string, { access, failedAuthentications }: Pick<Services, "access" | "failedAuthentications">): Promise<number> {
  // The common case, a key that passed just before from a client never refused, awaits nothing.
  const limited = !failedAuthentications.quiet && !fromThisMachine(request);
  const wait = limited ? await failedAuthentications.retryAfter(clientAddress(request)) : undefined;
  if (wait !== undefined) throw tooManyFailedAttempts(wait);
  const key = request.headers.get("api-key");
  const environmentId = access.passedBefore(slug, key) ?? (await access.authenticate(slug, key));
  if (environmentId === undefined) {
    if (!fromThisMachine(request)) await failedAuthentications.recordFailure(clientAddress(request));
    throw unauthorized();
  }
  return environmentId;
}

/**
 * Authenticates every request of the routes it is used by, before anything else about the request is looked at
 * (derive runs before validation and the handler).
 */
export const authentication = (services: Pick<Services, "access" | "failedAuthentications">) =>
  new Elysia({ name: "authentication" }).derive({ as: "scoped" }, async ({ params, request }) => ({
    environmentId: await authenticate(request, (params as Record<string, string | undefined>).env ?? "", services),
  }));
