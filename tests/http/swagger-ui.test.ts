import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { testTls } from "../helpers/backend";
import { requireChromium, sharedBrowser } from "../helpers/browser";
import { startTestServer, type TestServer } from "../helpers/server";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

/** The Swagger UI page and the scripts it runs from this server, as one text. */
async function swaggerPageAndScripts(): Promise<string> {
  const html = await (await fetch(`${server.url}/swagger`)).text();
  const own = [...html.matchAll(/<script src="([^"]+)"/g)].map((match) => match[1]!).filter((src) => !src.endsWith("swagger-ui-bundle.js"));
  const scripts = await Promise.all(own.map(async (src) => (await fetch(`${server.url}${src}`)).text()));
  return [html, ...scripts].join("\n");
}

describe("Swagger UI keeps no key after the page", () => {
  test("its configuration does not persist authorization", async () => {
    const text = await swaggerPageAndScripts();
    expect(text).toContain("SwaggerUIBundle(");
    expect(text).not.toMatch(/persistAuthorization:\s*true/);
  });

  if (requireChromium("Swagger UI's authorization in headless Chromium")) {
    test("a key authorized in /swagger is in no storage of the origin, for the console's page to read", async () => {
      const context = await (await sharedBrowser({ trusted: testTls ? [testTls.cert] : [] })).newContext();
      try {
        const page = await context.newPage();
        await page.goto(`${server.url}/swagger`);
        await page.waitForSelector("#operations-Imports-importAssets", { timeout: 15_000 });
        // As a person does it: Authorize, the key pasted, Authorize in the dialog.
        await page.click(".auth-wrapper .authorize");
        await page.fill(".auth-container input", server.key);
        await page.click(".auth-btn-wrapper .authorize");
        await page.waitForSelector(".auth-btn-wrapper button.btn-done, .auth-btn-wrapper .logout", { timeout: 5_000 });
        await page.reload();
        const consolePage = await context.newPage();
        await consolePage.goto(`${server.url}/console`);
        const stored = await consolePage.evaluate(() => JSON.stringify({ local: { ...localStorage }, session: { ...sessionStorage }, cookies: document.cookie }));
        expect(stored).not.toContain(server.key.split("_")[0]!);
      } finally {
        await context.close();
      }
    }, 60_000);
  }
});
