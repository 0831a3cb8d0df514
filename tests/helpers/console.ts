import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { testTls } from "./backend";
import { sharedBrowser } from "./browser";
import { projectRoot } from "./process";

/** Where the console's tests save a screenshot of each main screen, for a person to look at (a CI artifact). */
export const artifacts = join(projectRoot, "test-artifacts");

/** The whole page, or its top `height` pixels (a long page, for the README). */
export async function screenshot(page: Page, name: string, height?: number): Promise<void> {
  mkdirSync(artifacts, { recursive: true });
  const clip = height === undefined ? undefined : { x: 0, y: 0, width: page.viewportSize()!.width, height };
  await page.screenshot({ path: join(artifacts, `console-${name}.png`), fullPage: true, clip });
}

/**
 * One tab that a file's tests take turns in, each given it signed out (its session storage emptied; signIn's
 * navigation then shows the sign-in form): a new page costs Chromium some 1.2 CPU-s, the same tab's navigation far
 * less. A test that needs a tab of its own, or a window of another size, opens it itself.
 */
export function sharedTab(context: BrowserContext): () => Promise<Page> {
  let page: Page | undefined;
  return async () => {
    if (page === undefined || page.isClosed()) return (page = await context.newPage());
    // A blank tab (before its first navigation) has no session storage to empty.
    if (page.url() !== "about:blank") await page.evaluate(() => sessionStorage.clear());
    return page;
  };
}

/** Signs in on the console's page as a person does: environment, key, the button. */
export async function signIn(page: Page, url: string, key: string, environment = "default"): Promise<void> {
  await page.goto(`${url}/console`);
  await page.getByLabel("Environment").fill(environment);
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
}

/**
 * A window of the console's tests: a context of its own in the process's shared Chromium (sharedBrowser), trusting the
 * test server's certificate in the HTTPS pass, `width`×800, downloads kept. A file closes its contexts, not the browser.
 * Its actions wait Playwright's 30 s at most, so each test gives itself at least 60 s: a page that stops answering
 * (seen once in CI, three passes on two cores) then fails with Playwright's call log, which says what it waited for,
 * and not with bun's bare timeout, which also kills what the test started.
 */
export async function consoleContext(width = 1280): Promise<BrowserContext> {
  const browser = await sharedBrowser({ trusted: testTls ? [testTls.cert] : [] });
  return await browser.newContext({ viewport: { width, height: 800 }, acceptDownloads: true });
}
