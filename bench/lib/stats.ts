/** Small statistics for benchmark samples. */

export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  // Nearest rank: p99 of 20 samples is the largest, never an interpolation below it.
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export const median = (samples: number[]) => {
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

/** Peak resident set (VmHWM) of a process, in bytes. */
export async function peakRssOf(pid: number): Promise<number> {
  const status = await Bun.file(`/proc/${pid}/status`).text();
  const match = status.match(/^VmHWM:\s+(\d+) kB/m);
  if (!match) throw new Error(`no VmHWM for process ${pid}`);
  return Number(match[1]) * 1024;
}
