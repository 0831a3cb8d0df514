/**
 * The allocator setting importd ships with (`npm start`, deploy/importd.service), which every process of the bench
 * runs with, importd and the baselines alike. Bun's mimalloc gives freed memory back to the system 100 ms after it
 * is freed by default, and on a virtual machine touching it again costs a page fault per 4 KB (here about 3 ms a
 * MB): an 8 MB intake that followed the previous job paid that for its body, its string and its records. A
 * variable set for the bench itself wins.
 */
export const runtimeVariables: Record<string, string> = { MIMALLOC_PURGE_DELAY: process.env.MIMALLOC_PURGE_DELAY ?? "1000" };

/** The bench's own environment with those: for the baselines, which run with the bench's environment. */
export const runtimeEnv: Record<string, string> = { ...(process.env as Record<string, string>), ...runtimeVariables };
