/**
 * When a delivery that failed is tried again: exponential backoff with jitter, for 24 hours from the event. The n-th
 * retry waits 5 s × 3^(n-1), at most 8 hours, each wait drawn between 80% and 120% of that (so that receivers coming
 * back are not hit by every sender at once): about 5 s, 15 s, 45 s, 2 min, 7 min, 20 min, 1 h, 3 h, 8 h, 8 h after
 * each failure. The last attempt is made at the 24 hours' end; after it, the delivery is given up (failed).
 */

export const retryWindowMs = 24 * 60 * 60 * 1000;
const firstDelayMs = 5_000;
const longestDelayMs = 8 * 60 * 60 * 1000;

/** The waits of the schedule without jitter, for the README and the OpenAPI text. */
export const retryDelaysMs = Array.from({ length: 10 }, (_, i) => Math.min(firstDelayMs * 3 ** i, longestDelayMs));

/**
 * When to try again after attempt `attempt` (1 for the first) failed at `nowMs`, for an event created at `createdAt`;
 * undefined when its 24 hours are over. `scale` shrinks the whole schedule (tests only).
 */
export function nextAttemptAt(attempt: number, createdAt: string, nowMs: number, { scale = 1, random = Math.random } = {}): string | undefined {
  const deadline = Date.parse(createdAt) + retryWindowMs * scale;
  if (nowMs >= deadline) return undefined;
  const delay = Math.min(firstDelayMs * 3 ** (attempt - 1), longestDelayMs) * scale * (0.8 + 0.4 * random());
  return new Date(Math.min(nowMs + delay, deadline)).toISOString();
}
