/** A job's figures as people read them, the same in the console and in `importd jobs`. */

/** 1,234,567. */
export const count = (n: number) => n.toLocaleString("en-US");

/** The time between two of a job's timestamps: 840 ms, 12.5 s, 3 min 5 s. */
export function elapsed(from: string, to: string): string {
  const ms = Date.parse(to) - Date.parse(from);
  if (ms < 1000) return `${ms} ms`;
  if (ms < 59_950) return `${(ms / 1000).toFixed(1)} s`;
  const seconds = Math.round(ms / 1000);
  return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}
