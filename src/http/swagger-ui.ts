import { Elysia } from "elysia";
import { pathOf } from "./request-target";
import { pageHeaders, swaggerPolicy } from "./security-headers";

const uiPath = "/swagger";
const assets = `${uiPath}/assets`;

const page = (title: string) => `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8" />
  <meta name="viewport" content="width=device-width, initial-scale=1" />
  <title>${title}</title>
  <link rel="stylesheet" href="${assets}/swagger-ui.css" />
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="${assets}/swagger-ui-bundle.js"></script>
  <script src="${assets}/swagger-init.js"></script>
</body>
</html>`;

// A file of its own, not inline in the page: the page's Content-Security-Policy allows scripts from this origin only.
const init = `window.ui = SwaggerUIBundle({
  url: "${uiPath}/json",
  dom_id: "#swagger-ui",
  // The key pasted under Authorize lives as long as the page: persisted, it would sit in this origin's
  // localStorage after the browser closed, readable by any page of the origin (the console's included).
  persistAuthorization: false,
  // Open every operation ready to try.
  tryItOutEnabled: true,
  displayRequestDuration: true,
});
`;

const cached = (body: string, type: string) => () =>
  new Response(body, { headers: { "content-type": type, "cache-control": "public, max-age=86400", ...pageHeaders(swaggerPolicy) } });

/**
 * Swagger UI's own files, embedded (also in the compiled binary: the appliance may have no way out to a CDN), and
 * loaded at the first request for them: imported at start, their 1.5 MB of text took 200 ms of every start.
 */
const loadedOnce = (load: () => Promise<{ default: string }>, type: string) => {
  let answer: Promise<() => Response> | undefined;
  return async () => (await (answer ??= load().then((text) => cached(text.default, type))))();
};
const bundle = loadedOnce(() => import("swagger-ui-dist/swagger-ui-bundle.js", { with: { type: "text" } }), "text/javascript; charset=utf-8");
const css = loadedOnce(() => import("swagger-ui-dist/swagger-ui.css", { with: { type: "text" } }), "text/css; charset=utf-8");

/**
 * Swagger UI from local files. @elysiajs/swagger generates the document at /swagger/json, but its page
 * loads Swagger UI from unpkg; this page, answered before routing, is the same UI with no network needed.
 */
export const swaggerUi = (title: string) => {
  const html = page(title);
  return new Elysia({ name: "importd-swagger-ui" })
    // Runs before routing, for every request: most are not for this page, and a search of the URL tells them apart.
    .onRequest(({ request }) => {
      if (request.method !== "GET") return;
      const url = request.url;
      if (!url.includes(uiPath)) return;
      const path = pathOf(url);
      if (path === uiPath || path === `${uiPath}/`) return new Response(html, { headers: { "content-type": "text/html; charset=utf-8", ...pageHeaders(swaggerPolicy) } });
    })
    .get(`${assets}/swagger-ui-bundle.js`, bundle, { detail: { hide: true } })
    .get(`${assets}/swagger-init.js`, cached(init, "text/javascript; charset=utf-8"), { detail: { hide: true } })
    .get(`${assets}/swagger-ui.css`, css, { detail: { hide: true } });
};
