import { Elysia } from "elysia";
import type { Services } from "../services";

/**
 * For the appliance's supervisor and monitoring, outside the environments and without a key:
 * they reveal no data, only whether the process is alive, ready, and how busy it is.
 */
export const operationsRoutes = (services: Services) =>
  new Elysia()
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
