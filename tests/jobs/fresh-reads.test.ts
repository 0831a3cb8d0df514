import { afterEach, expect, test } from "bun:test";
import { canceledOutput } from "../../src/jobs/outcome";
import type { JobDocument } from "../helpers/api";
import { startTestServer, type TestServer } from "../helpers/server";

// Status polls may be answered from memory (src/store/read-cache.ts), but never stale: a change committed by
// someone other than this server's own request handling shows on the very next poll.

let server: TestServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const status = async (s: TestServer, id: number) =>
  ((await (await fetch(`${s.base}/v2/status/${id}`, { headers: { "api-key": s.key } })).json()) as JobDocument).importJobStatus;

test("a job changed in the store by another connection is seen by the next poll", async () => {
  server = await startTestServer();
  const parked = await server.parkJob("default", 3_000);
  for (let i = 0; i < 5; i++) expect(await status(server, parked.id)).toBe("Pending");
  // Not through this server's API: nothing in the server hears of it but the database.
  const result = await (await server.store()).queue.cancel(parked.environmentId, parked.id, canceledOutput(1));
  expect(result?.canceled).toBe(true);
  expect(await status(server, parked.id)).toBe("Failed");
}, 20_000);
