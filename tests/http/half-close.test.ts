import { afterAll, beforeAll, expect, test } from "bun:test";
import { waitForJob } from "../helpers/api";
import { rawRequest } from "../helpers/raw-http";
import { startTestServer, type TestServer } from "../helpers/server";

// A client that sends a whole request and then shuts its write side (`nc -N`, shutdown(SHUT_WR)) is still owed the
// answer (RFC 9112 9.6). Bun.serve does not send an answer that is not ready when the client's FIN arrives: it
// treats the half-close as the client going away (reproduced without importd in tests/platform/bun-http.test.ts,
// and checked below so that a Bun that fixes it is noticed). What importd controls: the job is kept, and its log
// line names the real client and says that the answer was not delivered.

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

const post = (body: string) =>
  `POST /default/v2/subareas HTTP/1.1\r\nHost: importd\r\nApi-Key: ${server.key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;

test("a half-closed POST is committed, and logged with the client's address and closedByClient; its 202 does not arrive (Bun's)", async () => {
  // A body whose intake (parsing and checking 40,000 records on a worker thread) takes far longer than Bun takes to
  // read the FIN after its last byte: with one record the 202 was sometimes ready first, and went out.
  const records = Array.from({ length: 40_000 }, (_, n) => ({ id: `half-${n}`, name: "Half closed" }));
  const answer = await rawRequest(server.port, post(JSON.stringify(records)), 10_000, { halfClose: true });
  const line = await waitForLogLine((entry) => entry.msg === "request" && entry.method === "POST" && entry.path === "/default/v2/subareas");
  expect(line).toMatchObject({ status: 202, client: "127.0.0.1", closedByClient: true });
  // The job is there, and runs.
  expect(await waitForJob(server.base, server.key, line.jobId as number)).toMatchObject({ importJobStatus: "Succeeded" });
  // Bun's part: when this fails, Bun sends the answer after a half-close, and the README's note can go.
  expect(answer.raw).toBe("");
});

test("a GET answered before the FIN is read is delivered to a half-closed client, and logged without closedByClient", async () => {
  const answer = await rawRequest(server.port, "GET /healthz HTTP/1.1\r\nHost: importd\r\nConnection: close\r\n\r\n", 10_000, { halfClose: true });
  expect(answer.status).toBe(200);
  const line = await waitForLogLine((entry) => entry.path === "/healthz");
  expect(line).toMatchObject({ status: 200, client: "127.0.0.1" });
  expect(line).not.toHaveProperty("closedByClient");
});

async function waitForLogLine(match: (entry: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  for (let waited = 0; waited < 5_000; waited += 20) {
    const line = server.logs.find(match);
    if (line) return line;
    await Bun.sleep(20);
  }
  throw new Error("no such log line");
}
