import { payloadTooLarge, unsupportedMediaType } from "./problem";

/** `application/json`, optionally with `charset=utf-8`; anything else is a 415. */
export function requireJson(contentType: string | null): void {
  const [mediaType, ...parameters] = (contentType ?? "").split(";").map((part) => part.trim().toLowerCase());
  const charsetOk = parameters.every((parameter) => !parameter.startsWith("charset=") || parameter.replace(/"/g, "") === "charset=utf-8");
  if (mediaType !== "application/json" || !charsetOk) throw unsupportedMediaType(contentType);
}

/**
 * Reads the body into one buffer, refusing more than `maxBytes`. A declared Content-Length over the limit
 * is refused before reading; a chunked body is cut off as soon as it passes the limit.
 */
export async function readBody(request: Request, maxBytes: number): Promise<Uint8Array> {
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > maxBytes) throw payloadTooLarge(maxBytes);
  if (!request.body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => {});
      throw payloadTooLarge(maxBytes);
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0]!;
  const body = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}
