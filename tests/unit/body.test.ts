import { describe, expect, spyOn, test } from "bun:test";
import { readBody, wholeBodyBytes } from "../../src/http/body";
import { Problem } from "../../src/http/problem";

/** readBody reads a body of up to 16 MB with a declared length in one go, a bigger one or a chunked one as a stream. */

/** Bytes that differ from place to place, so that a chunk copied to the wrong offset shows. */
function bytesOf(length: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = (i * 31 + (i >> 12)) & 0xff;
  return bytes;
}

const declared = (body: Uint8Array<ArrayBuffer>) =>
  new Request("http://importd.test/default/v2/assets", { method: "POST", body, headers: { "content-length": String(body.byteLength) } });

/** A body without a Content-Length, in chunks of `chunkBytes`. */
function chunked(body: Uint8Array, chunkBytes = 64 * 1024): Request {
  let offset = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= body.byteLength) return controller.close();
      controller.enqueue(body.slice(offset, offset + chunkBytes));
      offset += chunkBytes;
    },
  });
  return new Request("http://importd.test/default/v2/assets", { method: "POST", body: stream, duplex: "half" } as RequestInit);
}

async function expectTooLarge(read: Promise<unknown>, maxBytes: number) {
  const error = await read.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(Problem);
  expect((error as Problem).status).toBe(413);
  expect((error as Problem).message).toContain(`${maxBytes} bytes`);
}

describe("readBody", () => {
  test("a body with a declared length comes back byte for byte, read in one go up to 16 MB and as a stream above", async () => {
    expect(wholeBodyBytes).toBe(16 * 1024 * 1024);
    for (const length of [0, 1, 300 * 1024, wholeBodyBytes, wholeBodyBytes + 1, wholeBodyBytes + 3 * 1024 * 1024 + 7]) {
      const body = bytesOf(length);
      const request = declared(body);
      const inOneGo = spyOn(request, "bytes");
      const read = await readBody(request, 64 * 1024 * 1024);
      expect({ length, inOneGo: inOneGo.mock.calls.length }).toEqual({ length, inOneGo: length <= wholeBodyBytes ? 1 : 0 });
      expect(read.byteLength).toBe(length);
      expect(Buffer.compare(read, body)).toBe(0);
    }
  });

  test("a body longer than its declared length is refused once it passes the limit", async () => {
    const request = new Request("http://importd.test/default/v2/assets", { method: "POST", body: bytesOf(5_000), headers: { "content-length": "10" } });
    expect(request.headers.get("content-length")).toBe("10");
    await expectTooLarge(readBody(request, 4_000), 4_000);
  });

  test("a chunked body comes back byte for byte, growing its buffer as it goes", async () => {
    const body = bytesOf(1024 * 1024 + 5);
    const read = await readBody(chunked(body, 50_000), 4 * 1024 * 1024);
    expect(Buffer.compare(read, body)).toBe(0);
  });

  test("a declared length over the limit is refused before anything is read", async () => {
    const request = declared(bytesOf(2_000));
    await expectTooLarge(readBody(request, 1_999), 1_999);
    expect(request.bodyUsed).toBe(false);
  });

  test("a chunked body is cut off once it passes the limit", async () => {
    await expectTooLarge(readBody(chunked(bytesOf(300 * 1024)), 200 * 1024), 200 * 1024);
    const exact = bytesOf(200 * 1024);
    expect(Buffer.compare(await readBody(chunked(exact), 200 * 1024), exact)).toBe(0);
  });
});
