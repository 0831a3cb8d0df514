import { Elysia } from "elysia";
import type { AccessRepository } from "../access/repository";
import { unauthorized } from "./problem";

/**
 * Resolves the caller's environment from the `{env}` path segment and the Api-Key header, before
 * anything else about the request is looked at (derive runs before validation and the handler).
 */
export const authentication = (access: AccessRepository) =>
  new Elysia({ name: "authentication" }).derive({ as: "scoped" }, ({ params, request }) => {
    const slug = (params as Record<string, string | undefined>).env ?? "";
    const environmentId = access.authenticate(slug, request.headers.get("api-key"));
    if (environmentId === undefined) throw unauthorized();
    return { environmentId };
  });
