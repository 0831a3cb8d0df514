import { SourceError } from "./problems";

/**
 * A file's bytes as UTF-8 text, streamed, refusing with the line what is not text: a NUL byte (a binary file, or
 * UTF-16 without its mark), a byte sequence that is not UTF-8 (a file saved as Windows-1252, say, whose accents
 * would otherwise come through as U+FFFD), or UTF-16. Nothing is guessed or replaced: what the file says is what
 * is imported, or the user is told (DECISIONS 12). A byte order mark is dropped.
 */

// Made in problems.ts, beside the codes and values it may carry; found here as before.
export { SourceError };

/**
 * A file to import, which can be read from its start as often as the import needs (the survey reads it before the
 * records are): a local file for the CLI (`createReadStream`), a File picked in a browser (`file.stream()`). Nothing
 * else here knows where the bytes come from. `name` is how the messages call it.
 */
export type InputFile = { name: string; read(): AsyncIterable<Uint8Array> };

const lineFeed = 0x0a;

/** How many line feeds `text` holds before `end`. */
function lineFeeds(text: string | Uint8Array, end = text.length): number {
  let count = 0;
  if (typeof text === "string") for (let at = text.indexOf("\n"); at !== -1 && at < end; at = text.indexOf("\n", at + 1)) count++;
  else for (let at = text.indexOf(lineFeed); at !== -1 && at < end; at = text.indexOf(lineFeed, at + 1)) count++;
  return count;
}

/** The offset of the first byte that does not belong to a well-formed UTF-8 sequence, or -1. */
export function invalidUtf8At(bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; ) {
    const lead = bytes[i]!;
    const size = lead < 0x80 ? 1 : lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
    if (size === 0) return i;
    for (let k = 1; k < size; k++) {
      const next = bytes[i + k];
      if (next === undefined) return i; // cut off at the end
      // The second byte's range excludes overlong forms, surrogates and code points past U+10FFFF.
      const [low, high] = k > 1 ? [0x80, 0xbf] : lead === 0xe0 ? [0xa0, 0xbf] : lead === 0xed ? [0x80, 0x9f] : lead === 0xf0 ? [0x90, 0xbf] : lead === 0xf4 ? [0x80, 0x8f] : [0x80, 0xbf];
      if (next < low || next > high) return i;
    }
    i += size;
  }
  return -1;
}

const hex = (byte: number) => `0x${byte.toString(16).toUpperCase().padStart(2, "0")}`;

/** `onBytes` hears how much of the file has been read, for progress. */
export async function* textOf(file: InputFile, onBytes: (bytes: number) => void = () => {}): AsyncGenerator<string> {
  const path = file.name;
  const decoder = new TextDecoder("utf-8", { fatal: true });
  let bytesBefore = 0;
  let linesBefore = 0;
  let tail: Uint8Array = new Uint8Array(0);
  for await (const chunk of file.read()) {
    onBytes(chunk.length);
    if (bytesBefore === 0 && chunk.length >= 2 && ((chunk[0] === 0xff && chunk[1] === 0xfe) || (chunk[0] === 0xfe && chunk[1] === 0xff))) {
      throw new SourceError(
        `${path} is UTF-16 text (as Excel's "Unicode Text" saves it); importd reads UTF-8. Save it as "CSV UTF-8", or convert it: ${conversion(path, "UTF-16")}`,
      );
    }
    // Looked for in the bytes first: a binary file is also not UTF-8, and "not a text file" is what to say of it.
    const nul = chunk.indexOf(0);
    if (nul !== -1) {
      throw new SourceError(
        `${path} is not a text file: line ${linesBefore + lineFeeds(chunk, nul) + 1} holds a NUL byte. importd imports CSV, NDJSON and JSON text in UTF-8; is this the file you meant?`,
      );
    }
    let text: string;
    try {
      text = decoder.decode(chunk, { stream: true });
    } catch {
      throw notUtf8(path, tail, chunk, bytesBefore, linesBefore);
    }
    bytesBefore += chunk.length;
    linesBefore += lineFeeds(text);
    tail = chunk.subarray(Math.max(0, chunk.length - 3));
    if (text !== "") yield text;
  }
  try {
    const rest = decoder.decode();
    if (rest !== "") yield rest;
  } catch {
    throw new SourceError(`${path} ends in the middle of a UTF-8 character: the file is cut short, or not UTF-8 text.`);
  }
}

/** Where the bytes stop being UTF-8, as a message; `tail` holds the last bytes before `chunk`, which a character may have begun in. */
function notUtf8(path: string, tail: Uint8Array, chunk: Uint8Array, bytesBefore: number, linesBefore: number): SourceError {
  // Start at the first byte of `tail` that can begin a character, so that the check is in step with the text.
  let from = 0;
  while (from < tail.length && (tail[from]! & 0xc0) === 0x80) from++;
  const joined = new Uint8Array(tail.length - from + chunk.length);
  joined.set(tail.subarray(from));
  joined.set(chunk, tail.length - from);
  const bad = Math.max(0, invalidUtf8At(joined));
  const inChunk = bad - (tail.length - from);
  const line = linesBefore + (inChunk > 0 ? lineFeeds(chunk, inChunk) : 0) + 1;
  return new SourceError(
    `${path} line ${line} is not UTF-8 text (byte ${hex(joined[bad] ?? 0)} at byte ${(bytesBefore + inChunk).toLocaleString("en-US")} of the file): it is probably in another ` +
      `encoding, such as Windows-1252. Save it as UTF-8 ("CSV UTF-8" in Excel), or convert it: ${conversion(path, "WINDOWS-1252")}`,
  );
}

/** A path as a shell reads it: quoted when it holds anything but the characters a path usually has. */
export const shellWord = (path: string) => (/^[\w@%+=:,./-]+$/.test(path) ? path : `'${path.replaceAll("'", "'\\''")}'`);

/**
 * The iconv command that converts `path` to UTF-8, beside it, under a name importd can tell the format of (the
 * extension kept: `data/x.csv` → `data/x.utf8.csv`). A name that does not say the format was imported with --format,
 * which the converted file needs as well (issue 44: `utf8-x.txt` was refused for its name).
 */
export function conversion(path: string, encoding: string): string {
  const slash = path.lastIndexOf("/") + 1;
  const name = path.slice(slash);
  const dot = name.lastIndexOf(".");
  const [stem, extension] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ""];
  const converted = `${path.slice(0, slash)}${stem}.utf8${extension}`;
  const named = /^\.(csv|tsv|ndjson|jsonl|json)$/i.test(extension);
  return `iconv -f ${encoding} -t UTF-8 ${shellWord(path)} > ${shellWord(converted)}${named ? "" : `, and import that with the same --format`}`;
}

const encoder = new TextEncoder();
const scratch = new Uint8Array(192 * 1024);

/** A text's length in UTF-8 bytes (Buffer.byteLength, which browsers lack): encoded into a reused buffer, or if longer, anew. */
export function utf8Length(text: string): number {
  return text.length * 3 <= scratch.length ? encoder.encodeInto(text, scratch).written : encoder.encode(text).length;
}
