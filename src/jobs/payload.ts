/**
 * How a job's body is kept until the job is applied. Bodies of `compressFrom` bytes or more are stored
 * zstd-compressed at its fastest level: JSON records shrink several times (docs/performance.md), so there is less to
 * write (and sync) before the 202, and less for the checkpoint to copy into the database file afterwards.
 * Small bodies are stored as they came: compressing a few hundred bytes saves nothing.
 *
 * A stored payload says itself which it is: a zstd frame starts with its magic number, and no body that
 * passed validation (a JSON array, perhaps after whitespace or a byte order mark) starts with those bytes.
 * So payloads stored uncompressed, by this version or an earlier one, read back as they are.
 */
const compressFrom = 64 * 1024;
const zstdMagic = [0x28, 0xb5, 0x2f, 0xfd];

const isZstd = (bytes: Uint8Array) => bytes.length >= 4 && zstdMagic.every((byte, index) => bytes[index] === byte);

/**
 * The bytes to store for a request body. A big body is compressed on Bun's own thread pool, so the caller can
 * start it first and parse and validate the body meanwhile, on another core.
 */
export async function storedPayload(body: Uint8Array): Promise<Uint8Array> {
  return body.byteLength < compressFrom ? body : await Bun.zstdCompress(body, { level: 1 });
}

/** The request body a stored payload was made from. */
export function requestBody(stored: Uint8Array): Uint8Array {
  return isZstd(stored) ? Bun.zstdDecompressSync(stored) : stored;
}
