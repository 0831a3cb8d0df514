import { count as figure, elapsed } from "../jobs/figures";

/** How the console writes numbers, times and durations: the same everywhere, and as `importd jobs` does. */
export const count = (n: number | undefined) => (n === undefined ? "–" : figure(n));

export const time = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString("en-GB", { dateStyle: "short", timeStyle: "medium" }) : "–");

export const duration = (from: string | null | undefined, to: string | null | undefined) => (from && to ? elapsed(from, to) : "–");
