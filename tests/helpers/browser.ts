import { createHash, X509Certificate } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";

/**
 * Headless Chromium for the tests, Debian's (`apt-get install chromium`), driven by playwright-core: nothing is
 * downloaded at run time. Without it the browser tests say they were skipped, except under CI (the CI variable
 * set), where .ci/run installs it and a missing browser is a failure.
 */
const executablePath = "/usr/bin/chromium";

export const chromiumAvailable = existsSync(executablePath);

export function requireChromium(what: string): boolean {
  if (chromiumAvailable) return true;
  if (process.env.CI) throw new Error(`${what}: no ${executablePath}, and under CI it is required (apt-get install chromium)`);
  console.warn(`SKIPPED ${what}: no ${executablePath} (apt-get install chromium, then run the tests again)`);
  return false;
}

/**
 * A headless Chromium that trusts the certificates in `trusted` (PEM files) by their public keys, as a person who
 * accepted them would have it: everything else is checked as usual. Flags as this machine needs them: no sandbox
 * (root), and none of the browser's own calls home, which a closed network refuses.
 */
export function launchBrowser({ trusted = [] as string[] } = {}): Promise<Browser> {
  const pins = trusted.map((file) => createHash("sha256").update(new X509Certificate(readFileSync(file)).publicKey.export({ type: "spki", format: "der" })).digest("base64"));
  return chromium.launch({
    executablePath,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      ...(pins.length > 0 ? [`--ignore-certificate-errors-spki-list=${pins.join(",")}`] : []),
    ],
  });
}
