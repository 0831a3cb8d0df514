/** Small statistics for benchmark samples. */
import { readdirSync, readFileSync } from "node:fs";

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

// Linux counts a process's CPU time in clock ticks of 1/100 s (USER_HZ, 100 on every mainstream architecture).
const msPerTick = 10;

/** User + system CPU time, in ms, from a `/proc/…/stat` file (a process's or one thread's). */
function cpuMsOfStat(path: string): number {
  const stat = readFileSync(path, "utf8");
  // The command name, in parentheses, may hold spaces: count fields after its closing one.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * msPerTick;
}

/** CPU time (user + system, all its threads) a process has used so far, in ms; 0 once it is gone. */
export function cpuMsOf(pid: number): number {
  try {
    return cpuMsOfStat(`/proc/${pid}/stat`);
  } catch {
    return 0;
  }
}

/**
 * CPU time (ms) each of a process's threads has used so far, added up by thread name: Bun names its main thread
 * after the executable, each worker thread `Worker`, the JIT's compiler threads `JITWorker`, and so on. Empty once
 * the process is gone.
 */
export function threadCpuMsOf(pid: number): Record<string, number> {
  const byName: Record<string, number> = {};
  let threads: string[];
  try {
    threads = readdirSync(`/proc/${pid}/task`);
  } catch {
    return byName;
  }
  for (const thread of threads) {
    try {
      const name = readFileSync(`/proc/${pid}/task/${thread}/comm`, "utf8").trim();
      byName[name] = (byName[name] ?? 0) + cpuMsOfStat(`/proc/${pid}/task/${thread}/stat`);
    } catch {
      // The thread ended meanwhile.
    }
  }
  return byName;
}
