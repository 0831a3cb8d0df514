import { afterAll, expect, test } from "bun:test";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { launchBrowser, requireChromium } from "../helpers/browser";
import { projectRoot, spawnServer, type ServerProcess } from "../helpers/process";
import { tempDir } from "../helpers/server";

// Swagger UI served by importd over HTTPS, in a real browser: the page, its scripts and the OpenAPI document all
// come over TLS from importd itself, and the document's server is the page's own origin.

if (requireChromium("Swagger UI over HTTPS in headless Chromium")) {
  let server: ServerProcess | undefined;
  const dataDir = tempDir("importd-tls-swagger-");
  afterAll(() => {
    server?.proc.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  });

  test("Swagger UI over HTTPS loads in headless Chromium that trusts importd's self-signed certificate, lists the operations, and sends a request over TLS", async () => {
    server = await spawnServer(dataDir, ["--host", "0.0.0.0"]);
    // A browser of its own: it trusts the certificate this server made for itself, which no other file's browser
    // does, so a shared one would only stay open for the rest of the process.
    const browser = await launchBrowser({ trusted: [join(dataDir, "tls", "importd.crt")] });
    try {
      const page = await browser.newPage();
      const failures: string[] = [];
      page.on("requestfailed", (request) => failures.push(`${request.url()}: ${request.failure()?.errorText}`));
      page.on("response", (reply) => reply.status() >= 400 && !reply.url().endsWith("/default/v2/jobs") && failures.push(`${reply.url()}: ${reply.status()}`));
      const response = await page.goto(`${server.url}/swagger`);
      expect(response?.status()).toBe(200);
      expect(page.url()).toStartWith("https://");
      await page.waitForSelector(".swagger-ui .info .title", { timeout: 15_000 });
      expect(await page.textContent(".swagger-ui .info .title")).toContain("importd");
      await page.waitForSelector("#operations-Imports-importAssets", { timeout: 15_000 });
      expect(await page.locator(".opblock").count()).toBeGreaterThan(10);
      // A request from the page itself, over the page's TLS connection (no key: answered 401 Problem Details).
      const answer = await page.evaluate(async () => {
        const reply = await fetch("/default/v2/jobs");
        return { status: reply.status, type: reply.headers.get("content-type") };
      });
      expect(answer).toEqual({ status: 401, type: "application/problem+json" });
      const screenshots = join(projectRoot, "test-artifacts");
      mkdirSync(screenshots, { recursive: true });
      await page.screenshot({ path: join(screenshots, "swagger-ui-https.png") });
      expect(failures).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 60_000);
}
