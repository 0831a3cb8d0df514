import { Elysia } from "elysia";
import { pathOf } from "./request-target";
import { pageHeaders, swaggerPolicy } from "./security-headers";
// Embedded (also in the compiled binary): the appliance may have no way out to a CDN.
import bundle from "swagger-ui-dist/swagger-ui-bundle.js" with { type: "text" };
import css from "swagger-ui-dist/swagger-ui.css" with { type: "text" };

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
 * Swagger UI from local files. @elysiajs/swagger generates the document at /swagger/json, but its page
 * loads Swagger UI from unpkg; this page, answered before routing, is the same UI with no network needed.
 */
export const swaggerUi = (title: string) => {
  const html = page(title);
  return new Elysia({ name: "importd-swagger-ui" })
    .onRequest(({ request }) => {
      if (request.method !== "GET") return;
      const path = pathOf(request.url);
      if (path === uiPath || path === `${uiPath}/`) return new Response(html, { headers: { "content-type": "text/html; charset=utf-8", ...pageHeaders(swaggerPolicy) } });
    })
    .get(`${assets}/swagger-ui-bundle.js`, cached(bundle, "text/javascript; charset=utf-8"), { detail: { hide: true } })
    .get(`${assets}/swagger-init.js`, cached(init, "text/javascript; charset=utf-8"), { detail: { hide: true } })
    .get(`${assets}/swagger-ui.css`, cached(css, "text/css; charset=utf-8"), { detail: { hide: true } });
};
