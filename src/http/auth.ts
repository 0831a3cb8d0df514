import { Elysia } from "elysia";
import { clientAddress } from "./client-address";
import { tooManyFailedAttempts, unauthorized } from "./problem";
import type { Services } from "./services";

/**
 * Resolves the caller's environment from the `{env}` path segment and the Api-Key header, before
 * anything else about the request is looked at (derive runs before validation and the handler).
 * An address that has sent too many wrong keys gets 429 without its key being checked.
 */
export const authentication = ({ access, failedAuthentications }: Pick<Services, "access" | "failedAuthentications">) =>
  new Elysia({ name: "authentication" }).derive({ as: "scoped" }, async ({ params, request }) => {
    // The common case, a key that passed just before from a client never refused, awaits nothing.
    const wait = failedAuthentications.quiet ? undefined : await failedAuthentications.retryAfter(clientAddress(request));
    if (wait !== undefined) throw tooManyFailedAttempts(wait);
    const slug = (params as Record<string, string | undefined>).env ?? "";
    const key = request.headers.get("api-key");
    const environmentId = access.passedBefore(slug, key) ?? (await access.authenticate(slug, key));
    if (environmentId === undefined) {
      await failedAuthentications.recordFailure(clientAddress(request));
      throw unauthorized();
    }
    return { environmentId };
  });
