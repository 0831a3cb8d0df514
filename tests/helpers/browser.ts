import { createHash, X509Certificate } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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

/** A certificate's public key as Chromium's --ignore-certificate-errors-spki-list names it. */
const spkiPin = (file: string) =>
  createHash("sha256").update(new X509Certificate(readFileSync(file)).publicKey.export({ type: "spki", format: "der" })).digest("base64");

/**
 * A headless Chromium that trusts the certificates in `trusted` (PEM files) by their public keys, as a person who
 * accepted them would have it: everything else is checked as usual. Flags as this machine needs them: no sandbox
 * (root), and none of the browser's own calls home, which a closed network refuses. A file's tests take
 * sharedBrowser's; a file launches its own only for a reason it gives.
 */
export function launchBrowser({ trusted = [] as string[], artifactsDir }: { trusted?: string[]; artifactsDir?: string } = {}): Promise<Browser> {
  const pins = trusted.map(spkiPin);
  return chromium.launch({
    executablePath,
    artifactsDir,
    // Playwright's own handlers take SIGTERM, SIGINT and SIGHUP to close the browser, and the process then runs on: a
    // SIGTERM to `bun test` closed the browser and the tests went on, to pass. Without them a signal ends the test
    // process as it would without a browser, and Chromium ends with it (see sharedBrowser).
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
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

const shared = new Map<string, Promise<Browser>>();

/**
 * The test process's Chromium that trusts `trusted`, launched on its first use and kept for every later file: the
 * passes' `bun test --parallel --no-isolate` processes (tests/run.ts) keep one module registry from file to file. A
 * launch and close cost some 1.8 CPU-s more than a context in a running browser (8 of each, with a page: 23-25 CPU-s
 * against 11-12), and the 12 browser files, run as a pass runs them (two processes), took 199-234 CPU-s (median 218)
 * instead of 210-257 (median 231) with a browser each: 8 runs of each, alternating, on a busy machine.
 * Each file opens a BrowserContext of its own in it and closes that, never the browser. The trusted certificates are
 * launch flags, hence a browser per set of them; one that crashed or was closed is launched again.
 *
 * Nothing closes it (`bun test` runs no exit handlers), and nothing has to: Playwright drives Chromium over a pipe,
 * and Chromium quits when the pipe's other end is gone, however this process ended (none of its processes was left
 * 0.4 s after a SIGKILL of a `bun test` worker or of the whole run). What stays is what Playwright removes when it closes a browser, its profile
 * (a few MB) and artifacts directories in /tmp: a watchdog removes them once Chromium is gone.
 */
export async function sharedBrowser({ trusted = [] as string[] } = {}): Promise<Browser> {
  const key = trusted.map(spkiPin).join(",");
  const running = await shared.get(key)?.catch(() => undefined);
  if (running?.isConnected()) return running;
  const launched = launchShared(trusted);
  shared.set(key, launched);
  return launched;
}

async function launchShared(trusted: string[]): Promise<Browser> {
  const artifactsDir = mkdtempSync(join(tmpdir(), "importd-browser-"));
  const browser = await launchBrowser({ trusted, artifactsDir });
  const pid = newestChromium();
  const profile = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").find((arg) => arg.startsWith("--user-data-dir="))!.slice("--user-data-dir=".length);
  // The watchdog outlives this process; `tail --pid` looks for Chromium once a second without starting a process.
  // Detached: when a `bun test --parallel` worker crashes, bun kills the worker's process group, and a watchdog in it.
  Bun.spawn(["sh", "-c", `tail --pid=${pid} -f /dev/null; rm -rf "$0" "$1"`, artifactsDir, profile], { detached: true, stdio: ["ignore", "ignore", "ignore"] }).unref();
  return browser;
}

/** The newest Chromium this process started, from /proc (no pgrep: procps may be missing): the one just launched. */
function newestChromium(): number {
  let newest = { pid: 0, started: -1 };
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      continue; // Gone meanwhile.
    }
    // The command's name is in parentheses (and may hold spaces); after it come the state, the parent, and, as the
    // 22nd field of all, the start time.
    const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const started = Number(fields[19]);
    if (name === "chromium" && Number(fields[1]) === process.pid && started > newest.started) newest = { pid: Number(pid), started };
  }
  return newest.pid;
}
