import { bodyTimeout, payloadTooLarge, unsupportedMediaType, type Problem } from "./problem";
import { watchBody, type Upload, type UploadLimits } from "./uploads";

/** `application/json`, optionally with `charset=utf-8`; anything else is a 415. */
export function requireJson(contentType: string | null): void {
  const [mediaType, ...parameters] = (contentType ?? "").split(";").map((part) => part.trim().toLowerCase());
  const charsetOk = parameters.every((parameter) => !parameter.startsWith("charset=") || parameter.replace(/"/g, "") === "charset=utf-8");
  if (mediaType !== "application/json" || !charsetOk) throw unsupportedMediaType(contentType);
}

// Up to this size a body with a declared length is read by Bun in one go, which is several times faster than
// a stream reader (8 MB over loopback: about 7 ms against 33 ms, docs/performance.md, row 3). Bun grows its
// buffer on this thread as the bytes arrive, though, and for 100 MB that held the thread up for 200-300 ms
// at a time (a stream reader: about 50 ms), so bigger bodies are streamed into a buffer allocated once.
export const wholeBodyBytes = 16 * 1024 * 1024;

/**
 * Bun closes a connection that has been idle this long (server.ts): long enough for a held long poll (60 s) and for
 * the intake of a 100 MB batch, which sends nothing meanwhile. A body read in one go gets its 408 before then.
 */
export const connectionIdleSeconds = 255;

/** A chunked body's first buffer; it doubles as the body grows (and its reservation with it). */
const firstChunkedBytes = 64 * 1024;

/**
 * Reads the body into one buffer, refusing more than `maxBytes`. A declared Content-Length over the limit
 * is refused before reading; a chunked body is cut off as soon as it passes the limit.
 *
 * With an `upload` (uploads.ts), the buffer is reserved in the server's budget before it is allocated (a 429 or
 * 503 before a byte is read, for a declared length), and a body that stalls or crawls is cut off with 408. A body
 * read in one go cannot be watched chunk by chunk: it gets one deadline instead, the stall time as a grace plus
 * its length at the minimum rate, which is when a body that kept to the minimum rate would have arrived.
 */
export async function readBody(request: Request, maxBytes: number, upload?: Upload): Promise<Uint8Array> {
  const declared = request.headers.get("content-length");
  const declaredBytes = declared === null ? undefined : Number(declared);
  if (declaredBytes !== undefined && declaredBytes > maxBytes) throw payloadTooLarge(maxBytes);
  const known = declaredBytes !== undefined && Number.isSafeInteger(declaredBytes);
  upload?.reserve(known ? declaredBytes : firstChunkedBytes);
  // Before `request.body`: once the stream is made, Bun reads through it.
  if (declaredBytes !== undefined && declaredBytes <= wholeBodyBytes) {
    const body = await (upload ? withDeadline(request.bytes(), upload.limits, declaredBytes) : request.bytes());
    // Bun's parser holds a body to its Content-Length; a Request made in the process need not.
    if (body.byteLength > maxBytes) throw payloadTooLarge(maxBytes);
    return body;
  }
  if (!request.body) return new Uint8Array(0);
  let buffer = new Uint8Array(known ? declaredBytes : firstChunkedBytes);
  let total = 0;
  const reader = request.body.getReader();
  let cutOff: Problem | undefined;
  // Cancelling the reader ends the read in progress (done), and the loop below throws the 408.
  const unwatch = upload
    ? watchBody(upload.limits, () => total, (problem) => {
        cutOff = problem;
        void reader.cancel().catch(() => {});
      })
    : undefined;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (cutOff) throw cutOff;
      if (done) break;
      if (total + value.byteLength > maxBytes) {
        await reader.cancel().catch(() => {});
        throw payloadTooLarge(maxBytes);
      }
      // Only a chunked body (or one longer than declared) grows the buffer, doubling it each time.
      if (total + value.byteLength > buffer.byteLength) {
        const grownBytes = Math.min(maxBytes, Math.max(buffer.byteLength * 2, total + value.byteLength));
        try {
          upload?.reserve(grownBytes);
        } catch (problem) {
          await reader.cancel().catch(() => {});
          throw problem;
        }
        const grown = new Uint8Array(grownBytes);
        grown.set(buffer.subarray(0, total));
        buffer = grown;
      }
      buffer.set(value, total);
      total += value.byteLength;
    }
  } finally {
    unwatch?.();
  }
  return total === buffer.byteLength ? buffer : buffer.subarray(0, total);
}

/**
 * When a body read in one go (see readBody) is cut off: once a body at the minimum rate would have arrived, after the
 * grace; and in any case before Bun would close the idle connection without an answer. Without a minimum rate, only
 * that last: a body read in one go shows no progress, so a slow one cannot be told from one that stopped.
 */
export function wholeBodyDeadlineSeconds(limits: Pick<UploadLimits, "stallSeconds" | "minBytesPerSecond">, bytes: number): number {
  const latest = connectionIdleSeconds - 5;
  return limits.minBytesPerSecond > 0 ? Math.min(limits.stallSeconds + bytes / limits.minBytesPerSecond, latest) : latest;
}

/** A body read in one go: 408 if it has not arrived by its deadline. */
function withDeadline(read: Promise<Uint8Array>, limits: UploadLimits, bytes: number): Promise<Uint8Array> {
  const seconds = wholeBodyDeadlineSeconds(limits, bytes);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(bodyTimeout(limits, "late", seconds)), seconds * 1000);
  });
  // The read goes on until the connection closes after the 408; what it ends with is of no interest then.
  read.catch(() => {});
  return Promise.race([read, late]).finally(() => clearTimeout(timer));
}
