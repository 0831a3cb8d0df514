import { describe, expect, test } from "bun:test";
import { formatKey, hashSecret, newSecret, parseKey, secretMatches } from "../../src/access/api-key";

const secret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

describe("newSecret", () => {
  test("is 64 hex characters (256 bits) without '_', and fresh every time", () => {
    const secrets = new Set(Array.from({ length: 100 }, newSecret));
    expect(secrets.size).toBe(100);
    for (const fresh of secrets) expect(fresh).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe("formatKey", () => {
  test("joins secret and keyId with '_'", () => {
    expect(formatKey(secret, 17)).toBe(`${secret}_17`);
  });

  test("round-trips through parseKey", () => {
    const fresh = newSecret();
    expect(parseKey(formatKey(fresh, 1))).toEqual({ secret: fresh, keyId: 1 });
    expect(parseKey(formatKey(fresh, 123456789))).toEqual({ secret: fresh, keyId: 123456789 });
  });
});

describe("parseKey", () => {
  test("splits <secret>_<keyId>", () => {
    expect(parseKey(`${secret}_42`)).toEqual({ secret, keyId: 42 });
  });

  test("splits at the last '_', so the keyId is always the suffix", () => {
    expect(parseKey("a_b_3")).toEqual({ secret: "a_b", keyId: 3 });
  });

  test.each([
    ["an empty value", ""],
    ["the secret alone", secret],
    ["the keyId alone", "1"],
    ["the keyId alone with its '_'", "_1"],
    ["a secret with an empty keyId", `${secret}_`],
    ["keyId 0", `${secret}_0`],
    ["a keyId with a leading zero", `${secret}_01`],
    ["a negative keyId", `${secret}_-1`],
    ["a fractional keyId", `${secret}_1.5`],
    ["a keyId in exponent notation", `${secret}_1e3`],
    ["a keyId in hex", `${secret}_0x1`],
    ["a keyId with a space", `${secret}_ 1`],
    ["a keyId with trailing text", `${secret}_1a`],
    ["a keyId beyond the safe integer range", `${secret}_9007199254740993`],
    ["a keyId of 17 digits", `${secret}_12345678901234567`],
  ])("rejects %s", (_, value) => {
    expect(parseKey(value)).toBeUndefined();
  });

  test("accepts the largest safe keyId exactly", () => {
    expect(parseKey(`${secret}_9007199254740991`)).toEqual({ secret, keyId: 9007199254740991 });
  });
});

describe("secretMatches", () => {
  const stored = hashSecret(secret);
  const flip = (text: string, at: number) => text.slice(0, at) + (text[at] === "0" ? "1" : "0") + text.slice(at + 1);

  test("is true for the right secret", () => {
    expect(secretMatches(secret, stored)).toBe(true);
  });

  test("is true against a hash read back as a plain Uint8Array", () => {
    expect(secretMatches(secret, new Uint8Array(stored))).toBe(true);
  });

  test.each([
    ["the first character changed", flip(secret, 0)],
    ["a middle character changed", flip(secret, 31)],
    ["the last character changed", flip(secret, 63)],
    ["one character more", `${secret}0`],
    ["one character less", secret.slice(0, -1)],
    ["upper case", secret.toUpperCase()],
    ["surrounding white space", ` ${secret} `],
    ["the whole key instead of the secret", `${secret}_1`],
  ])("is false for a near miss: %s", (_, presented) => {
    expect(secretMatches(presented, stored)).toBe(false);
  });

  test.each([
    ["another secret", newSecret()],
    ["an empty secret", ""],
    ["the hash itself in hex", stored.toString("hex")],
  ])("is false for a far miss: %s", (_, presented) => {
    expect(secretMatches(presented, stored)).toBe(false);
  });

  test("is false against a missing hash, whatever the secret", () => {
    expect(secretMatches(secret, undefined)).toBe(false);
    expect(secretMatches("", undefined)).toBe(false);
  });

  test("is false against a hash of the wrong length", () => {
    expect(secretMatches(secret, new Uint8Array(0))).toBe(false);
    expect(secretMatches(secret, stored.subarray(0, 16))).toBe(false);
  });
});

describe("secretMatches timing", () => {
  test("takes the same time for a near miss, a far miss and an unknown key", () => {
    const secret = newSecret();
    const stored = hashSecret(secret);
    const near = `${secret.slice(0, -1)}${secret.endsWith("0") ? "1" : "0"}`;
    const far = newSecret();
    const cases = { near: () => secretMatches(near, stored), far: () => secretMatches(far, stored), unknown: () => secretMatches(far, undefined) };
    const samples: Record<string, number[]> = { near: [], far: [], unknown: [] };
    // Interleaved rounds, compared by median, so that a busy moment of the machine hits every case alike.
    for (let round = 0; round < 40; round++) {
      for (const [name, check] of Object.entries(cases)) {
        const start = Bun.nanoseconds();
        for (let i = 0; i < 1000; i++) check();
        samples[name]!.push(Bun.nanoseconds() - start);
      }
    }
    const median = (values: number[]) => values.sort((a, b) => a - b)[values.length >> 1]!;
    // Hashing the presented secret is nearly all of the time: a check that skipped it for an unknown key, or
    // stopped comparing at the first differing byte after hashing, is far outside this band; the band's width
    // is this shared machine's noise (0.78 was seen once, with other tests running).
    for (const name of ["near", "unknown"]) {
      const ratio = median(samples[name]!) / median(samples.far!);
      expect(ratio, `${name} / far`).toBeGreaterThan(0.6);
      expect(ratio, `${name} / far`).toBeLessThan(1.6);
    }
  });
});
