import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * API keys are `<secret>_<keyId>`: the keyId finds the stored row, the secret proves possession.
 * The secret is 32 random bytes in hex (256 bits, no `_`); only its SHA-256 is stored. A fast hash is
 * right here: the secret is random, so there is nothing for a slow hash to protect against guessing.
 */

export const newSecret = () => randomBytes(32).toString("hex");

export const hashSecret = (secret: string) => createHash("sha256").update(secret).digest();

export const formatKey = (secret: string, keyId: number) => `${secret}_${keyId}`;

export function parseKey(value: string): { secret: string; keyId: number } | undefined {
  const separator = value.lastIndexOf("_");
  if (separator <= 0) return undefined;
  const secret = value.slice(0, separator);
  const idText = value.slice(separator + 1);
  if (!/^[1-9][0-9]{0,15}$/.test(idText)) return undefined;
  // Past 2^53 Number() rounds, and the key would name another keyId than the one written.
  const keyId = Number(idText);
  return Number.isSafeInteger(keyId) ? { secret, keyId } : undefined;
}

// Compared against when the keyId is unknown, so that an unknown key costs the same as a wrong secret.
const decoyHash = hashSecret(newSecret());

/** Constant-time check of a presented secret against a stored hash (or the decoy when there is none). */
export function secretMatches(secret: string, storedHash: Uint8Array | undefined): boolean {
  const presented = hashSecret(secret);
  const expected = storedHash && storedHash.length === presented.length ? storedHash : decoyHash;
  return timingSafeEqual(presented, expected) && expected !== decoyHash;
}
