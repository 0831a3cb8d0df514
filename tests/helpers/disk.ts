import { closeSync, openSync, writeSync } from "node:fs";

/** Writes `file` until its filesystem is full (ENOSPC); answers how many bytes that took. */
export function fillTheDisk(file: string): number {
  const fd = openSync(file, "w");
  const chunk = new Uint8Array(256 * 1024);
  let written = 0;
  try {
    for (;;) written += writeSync(fd, chunk);
  } catch (error) {
    if ((error as { code?: string }).code !== "ENOSPC") throw error;
  } finally {
    closeSync(fd);
  }
  return written;
}
