/** How long an Idempotency-Key is remembered (24 hours): both stores replay, conflict and purge by it. */
export const idempotencyWindowMs = 24 * 60 * 60 * 1000;

/** The oldest moment a remembered key still counts from, as stored (ISO 8601). */
export const idempotencyWindowStart = () => new Date(Date.now() - idempotencyWindowMs).toISOString();
