import { swagger } from "@elysiajs/swagger";
import { componentSchemas } from "./schemas";
import { environmentAsServer, withMethodNotAllowed } from "./openapi";
import { Elysia, ValidationError } from "elysia";
import pkg from "../../package.json" with { type: "json" };
import { allowedMethods } from "./allowed-methods";
import { authenticate } from "./auth";
import { internalError, methodNotAllowed, notFound, Problem, storageProblem, validationProblem, webhookProblem } from "./problem";
import { queryNamesOf, repeatedParameters } from "./query-once";
import { pathOf } from "./request-target";
import { deletionRoutes } from "./routes/deletions";
import { exportRoutes } from "./routes/exports";
import { syncRoutes } from "./routes/syncs";
import { importRoutes } from "./routes/imports";
import { webhookRoutes } from "./routes/webhooks";
import { operationsRoutes } from "./routes/operations";
import { swaggerUi } from "./swagger-ui";
import { jobRoutes } from "./routes/jobs";
import { readRoutes } from "./routes/records";
import type { Services } from "./services";

const apiDescription = `Asynchronous bulk import. POST a JSON array of records to an import endpoint; the answer is 202 with a job.
Poll GET /v2/status/{id} until importJobStatus is Succeeded, PartiallySucceeded or Failed.

Every path is relative to an environment's base URL, \`/{env}\` (the server variable \`env\`; for example
\`/default/v2/assets\`), and needs the \`Api-Key\` header with a key of that environment (\`<secret>_<keyId>\`, issued with \`importd key create <env>\`).

Import sub areas, asset types and asset categories before the assets that refer to them: references are checked
when the job runs, against the records that exist in the environment at that time. Records are deleted by id with
POST /v2/deletions/<resource>, a job in the same order as the imports; GET /v2/deletions/<resource> lists what was
deleted, in the order it was.

What the schemas cannot say alone is said beside them: a required text field must not be blank, and no text may hold
the NUL character (U+0000), both in each field's \`pattern\`; a number pair that must be in order (\`startPoint\` ≤
\`endPoint\`) is in its object's description and in the vendor extension \`x-importd-ordered\`, a list of
\`{start, end}\` field names. A method a path does not answer is a 405 with \`Allow\` (with a good key: the key is
checked first); a query parameter sent empty, or given more than once, is a 400 naming it.`;

function toProblem(code: string | number, error: unknown, request: Request, methodsOf: (path: string) => string[] | undefined): Problem | undefined {
  if (error instanceof Problem) return error;
  const refused = storageProblem(error) ?? webhookProblem(error);
  if (refused) return refused;
  if (code === "NOT_FOUND") {
    const allowed = methodsOf(pathOf(request.url));
    return allowed ? methodNotAllowed(request.method, allowed) : notFound();
  }
  if (error instanceof ValidationError) {
    // The schema's own message (openapi.ts, pathParameter), under the name of what it is about.
    const field = error.valueError?.path.replace(/^\//, "") || "$";
    return validationProblem({ [field]: [String(error.customError ?? `'${field}' is not valid.`)] });
  }
  if (code === "VALIDATION" || code === "PARSE") {
    return validationProblem({ $: [(error as Error).message?.slice(0, 500) || "The request is malformed."] });
  }
  return undefined;
}

const underEnvironment = /^\/([^/]+)\/v2(?:\/|$)/;

/** For a request under an environment's API that no route answers: what refuses its caller, if anything does. */
async function refusedCaller(request: Request, services: Services): Promise<unknown> {
  const slug = underEnvironment.exec(pathOf(request.url))?.[1];
  if (slug === undefined) return undefined;
  try {
    await authenticate(request, slug, services);
    return undefined;
  } catch (error) {
    return error;
  }
}

/**
 * The OpenAPI document at /swagger/json (the UI is swagger-ui.ts). The plugin writes it from the routes; the hook,
 * local to this plugin so that no other route pays for it, declares the 405 on every operation and moves `{env}`
 * into the server URL.
 */
const apiDocument = () =>
  new Elysia({ name: "importd-openapi" })
    .onAfterHandle(({ path, response }) => (path === "/swagger/json" ? environmentAsServer(withMethodNotAllowed(response as Parameters<typeof environmentAsServer>[0])) : undefined))
    .use(
      swagger({
        path: "/swagger",
        provider: "swagger-ui",
        documentation: {
          // 3.1: its schemas are JSON Schema, which is what TypeBox writes (examples, null types, records).
          openapi: "3.1.0",
          // identifier is OpenAPI 3.1's (the plugin's types know 3.0's license object only).
          info: { title: "importd", version: pkg.version, description: apiDescription, license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" } as { name: string } },
          components: { securitySchemes: { ApiKey: { type: "apiKey", in: "header", name: "Api-Key" } }, schemas: componentSchemas() as never },
          security: [{ ApiKey: [] }],
          tags: [
            { name: "Imports", description: "Queue a batch of records as a job." },
            { name: "Jobs", description: "Follow jobs to their outcome." },
            { name: "Records", description: "Read back what was imported." },
            { name: "Deletions", description: "Delete records by id as jobs, and follow what was deleted." },
            { name: "Syncs", description: "Mirror a resource: send all of it in a sync, and its completion deletes what was not sent." },
          ],
        },
        exclude: ["/healthz", "/readyz", "/metrics"],
      }),
    );

/** The whole HTTP API, without listening; server.ts and the tests give it a port. */
export function buildApp(services: Services) {
  const { log } = services;
  // Read from the app's own routes when first needed, once they are all registered.
  let methodsOf: ((path: string) => string[] | undefined) | undefined;
  let queryNames: Map<string, ReadonlySet<string>> | undefined;
  // Elysia finds the path from the URL's 12th character on: routable() (request-target.ts) gives a host too short
  // for that (`Host: a`) a longer one.
  const app = new Elysia()
    .onError(async ({ code, error, request }): Promise<Response> => {
      // Under an environment, authentication comes before anything else about a request, its path and method
      // included (DECISIONS 1): no route answering it, the caller learns that only with a key of the environment.
      const refused = code === "NOT_FOUND" ? await refusedCaller(request, services) : undefined;
      const [kind, reported]: [string | number, unknown] = refused === undefined ? [code, error] : ["UNKNOWN", refused];
      const problem = toProblem(kind, reported, request, (path): string[] | undefined => (methodsOf ??= allowedMethods(app.routes))(path));
      if (problem) return problem.toResponse();
      // Unknown errors are logged with context and answered with a generic 500 that leaks nothing.
      log({ level: "error", msg: "unhandled error", method: request.method, path: pathOf(request.url), error: String((reported as Error)?.stack ?? reported) });
      return internalError().toResponse();
    })
    // A query parameter given twice is a 400 (query-once.ts): after authentication (a derive, which runs before
    // this) and before any handler reads the query or the body. The common request, a status poll, has no `?`, and a
    // query without `&` holds one parameter at most: a search or two of the URL (about 0.1 µs), nothing parsed.
    .onBeforeHandle(({ request, route }) => {
      const url = request.url;
      const queryStart = url.indexOf("?") + 1;
      if (queryStart === 0 || url.indexOf("&", queryStart) === -1) return;
      const names = (queryNames ??= queryNamesOf(app.routes)).get(`${request.method === "HEAD" ? "GET" : request.method} ${route}`);
      const problem = names && repeatedParameters(url, queryStart, names);
      if (problem) throw problem;
    })
    .use(swaggerUi("importd API"))
    .use(apiDocument())
    .use(operationsRoutes(services))
    .group("/:env/v2", (api) => api.use(importRoutes(services)).use(deletionRoutes(services)).use(syncRoutes(services)).use(jobRoutes(services)).use(readRoutes(services)).use(exportRoutes(services)).use(webhookRoutes(services)));
  return app;
}
