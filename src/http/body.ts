import { payloadTooLarge, unsupportedMediaType } from "./problem";

/** `application/json`, optionally with `charset=utf-8`; anything else is a 415. */
export function requireJson(contentType: string | null): void {
  const [mediaType, ...parameters] = (contentType ?? "").split(";").map((part) => part.trim().toLowerCase());
  const charsetOk = parameters.every((parameter) => !parameter.startsWith("charset=") || parameter.replace(/"/g, "") === "charset=utf-8");
  if (mediaType !== "application/json" || !charsetOk) throw unsupportedMediaType(contentType);
}

const smallBodyBytes = 256 * 1024;

/**
 * Reads the body into one buffer, refusing more than `maxBytes`. A declared Content-Length over the limit
 * is refused before reading; a chunked body is cut off as soon as it passes the limit. With a declared
 * length the buffer is allocated once and each chunk copied in as it arrives: copying 100 MB in one go
 * at the end would hold up this thread, and with it every other request, for tens of milliseconds.
 */
export async function readBody(request: Request, maxBytes: number): Promise<Uint8Array> {
  const declared = request.headers.get("content-length");
  const declaredBytes = declared === null ? undefined : Number(declared);
  if (declaredBytes !== undefined && declaredBytes > maxBytes) throw payloadTooLarge(maxBytes);
  if (!request.body) return new Uint8Array(0);
  // A small body with a declared length is read in one go: a stream reader costs more than the body then.
  if (declaredBytes !== undefined && declaredBytes <= smallBodyBytes) return new Uint8Array(await request.arrayBuffer());
  let buffer = new Uint8Array(declaredBytes !== undefined && Number.isSafeInteger(declaredBytes) ? declaredBytes : 64 * 1024);
  let total = 0;
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (total + value.byteLength > maxBytes) {
      await reader.cancel().catch(() => {});
      throw payloadTooLarge(maxBytes);
    }
    // Only a chunked body (or one longer than declared) grows the buffer, doubling it each time.
    if (total + value.byteLength > buffer.byteLength) {
      const grown = new Uint8Array(Math.min(maxBytes, Math.max(buffer.byteLength * 2, total + value.byteLength)));
      grown.set(buffer.subarray(0, total));
      buffer = grown;
    }
    buffer.set(value, total);
    total += value.byteLength;
  }
  return total === buffer.byteLength ? buffer : buffer.subarray(0, total);
}
