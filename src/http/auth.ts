import { Elysia } from "elysia";
import { clientAddress } from "./client-address";
import { tooManyFailedAttempts, unauthorized } from "./problem";
import type { Services } from "./services";

/**
 * The caller's environment, from the `{env}` path segment and the Api-Key header; a 401 or 429 Problem is thrown.
 * A client that has sent too many wrong keys gets 429 without its key being checked. Every client is limited, this
 * machine's own too (DECISIONS 8): a proxy here is trusted by default (--trusted-proxies loopback), so each client it
 * forwards for is counted on its own, and exempting loopback would exempt every one of them.
 *
 * Not an async function: the common case, a key that passed just before while no client was refused lately, is
 * answered at once, without an async frame and its promise of its own (every request asks: docs/performance.md, row 4).
 */
export function authenticate(request: Request, slug: string, services: Pick<Services, "access" | "failedAuthentications">): number | Promise<number> {
  const passed = services.failedAuthentications.quiet ? services.access.passedBefore(slug, request.headers.get("api-key")) : undefined;
  return passed ?? checkCaller(request, slug, services);
}

async function checkCaller(request: Request, slug: string, { access, failedAuthentications }: Pick<Services, "access" | "failedAuthentications">): Promise<number> {
  const wait = failedAuthentications.quiet ? undefined : await failedAuthentications.retryAfter(clientAddress(request));
  if (wait !== undefined) throw tooManyFailedAttempts(wait);
  const key = request.headers.get("api-key");
  const environmentId = access.passedBefore(slug, key) ?? (await access.authenticate(slug, key));
  if (environmentId === undefined) {
    await failedAuthentications.recordFailure(clientAddress(request));
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
