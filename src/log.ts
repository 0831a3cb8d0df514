import { writeSync } from "node:fs";
import type { Config } from "./config";

export type Log = (entry: Record<string, unknown> & { msg: string; level?: string }) => void;

const rank: Record<string, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/**
 * Writes lines to stderr once per turn of the event loop rather than once per line: under load the HTTP
 * thread logs a line per request, and one write per request cost a tenth of a status poll. Whatever is
 * still buffered when the process exits is written then, synchronously.
 */
export function bufferedStderr(): (line: string) => void {
  let buffered: string[] = [];
  const flush = () => {
    if (buffered.length === 0) return;
    const text = buffered.join("");
    buffered = [];
    process.stderr.write(text);
  };
  process.on("exit", () => {
    if (buffered.length > 0) writeSync(2, buffered.join(""));
    buffered = [];
  });
  return (line) => {
    if (buffered.push(line) === 1) setImmediate(flush);
  };
}

let lastMs = 0;
let lastIso = "";
/** The time as ISO text, formatted once per millisecond (under load many lines share one). */
function isoNow(): string {
  const ms = Date.now();
  if (ms !== lastMs) {
    lastMs = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
}

/** One JSON line per entry on stderr (or a short readable line with --log-format pretty). */
export function createLog(config: Pick<Config, "logLevel" | "logFormat">, write: (line: string) => void = bufferedStderr()): Log {
  const threshold = rank[config.logLevel] ?? 20;
  return (entry) => {
    const level = entry.level ?? "info";
    if ((rank[level] ?? 20) < threshold) return;
    const time = isoNow();
    if (config.logFormat === "pretty") {
      const { msg, level: _level, ...rest } = entry;
      const fields = Object.entries(rest).map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`);
      write(`${time} ${level.toUpperCase().padEnd(5)} ${msg}${fields.length ? ` ${fields.join(" ")}` : ""}\n`);
    } else {
      write(`${JSON.stringify({ time, ...entry, level })}\n`);
    }
  };
}
