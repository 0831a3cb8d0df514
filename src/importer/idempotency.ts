/**
 * What makes an import's Idempotency-Keys: a random id per run, and a fingerprint of each request's body. The same in
 * Bun and in any browser, where crypto.subtle and crypto.randomUUID exist only on HTTPS pages and localhost.
 * Keys made before 2026-11-26 used SHA-256: a progress file of an older CLI resumes with other keys, so a chunk queued
 * just before its interruption (and not yet in the file) is queued again. The chunks it recorded are not.
 */

/**
 * A short fingerprint of a text (two 32-bit FNV-1a lanes of its UTF-16 units). It guards against a changed chunk
 * being answered by an earlier one's job, not against anyone's intent.
 */
export function fingerprint(text: string): string {
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ text.length;
  for (let at = 0; at < text.length; at++) {
    const unit = text.charCodeAt(at);
    a = Math.imul(a ^ unit, 0x01000193);
    b = Math.imul(b ^ unit, 0x5bd1e995);
    b ^= b >>> 15;
  }
  return (a >>> 0).toString(16).padStart(8, "0") + (b >>> 0).toString(16).padStart(8, "0");
}

/** A run's id, random: from getRandomValues, which browsers give on plain HTTP pages too (randomUUID they do not). */
export function newRunId(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(8)), (byte) => byte.toString(16).padStart(2, "0")).join("");
}
