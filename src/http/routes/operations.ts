import { Elysia } from "elysia";
import type { Services } from "../services";

/**
 * For the appliance's supervisor and monitoring, outside the environments and without a key:
 * they reveal no data, only whether the process is alive, ready, and how busy it is.
 */
export const operationsRoutes = (services: Services) =>
  new Elysia()
    // Where a first-time visitor (or a browser pointed at the bare host) finds the way in.
    .get("/", () => ({ service: "importd", documentation: "/swagger", openapi: "/swagger/json", api: "/<environment>/v2/… (for example /default/v2/jobs), with an Api-Key header" }), {
      detail: { hide: true },
    })
    // Alive: the process answers HTTP. Nothing else is checked, so a busy database never gets it restarted.
    .get("/healthz", () => ({ status: "ok" }), { detail: { hide: true } })
    // Ready to take imports: the store answers and is migrated, the worker threads are up, not stopping.
    .get(
      "/readyz",
      async ({ set }) => {
        const report = await services.readiness();
        if (!report.ready) set.status = 503;
        return { status: report.ready ? "ready" : "not ready", ...report };
      },
      { detail: { hide: true } },
    )
    .get(
      "/metrics",
      async () => new Response(await services.metrics.text(), { headers: { "content-type": services.metrics.contentType } }),
      { detail: { hide: true } },
    );
