/** How the console writes numbers, times and durations: the same everywhere. */
export const count = (n: number | undefined) => (n === undefined ? "–" : n.toLocaleString("en-US"));

export const time = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString("en-GB", { dateStyle: "short", timeStyle: "medium" }) : "–");

export function duration(from: string | null | undefined, to: string | null | undefined): string {
  if (!from || !to) return "–";
  const ms = Date.parse(to) - Date.parse(from);
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}
