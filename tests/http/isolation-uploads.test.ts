import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, rmSync } from "node:fs";
import { openRequest, type OpenRequest } from "../helpers/raw-http";
import { withTestHooks, importd, spawnServer, type ServerProcess } from "../helpers/process";
import { asset } from "../helpers/records";
import { tempDir } from "../helpers/server";

/**
 * The measured attack of issue 43 (DECISIONS 15): several uploads with a valid key of environment A, each declaring a
 * large body, send most of it and stall. Measured before: six of 90 MB took the server from 107 MB to 1,139 MB, and
 * it went on answering health checks as if nothing were wrong. Now the server's memory stays within its budget of
 * bodies in flight, the health checks answer, environment B's import is 202 within seconds, and the stalled uploads
 * are cut off with 408.
 *
 * Modest in CI: 6 uploads of 24 MB. TEST_ATTACK_UPLOADS and TEST_ATTACK_UPLOAD_MB scale it up (6 and 90 is the
 * measured attack). The hard limit is one upload and the budget twice that, so that A's share (half the budget) holds
 * one and the figures show.
 */

const uploads = Number(process.env.TEST_ATTACK_UPLOADS ?? 6);
const uploadMb = Number(process.env.TEST_ATTACK_UPLOAD_MB ?? 24);
const megabyte = 1024 * 1024;
const budgetBytes = 2 * uploadMb * megabyte;
const stallSeconds = 8;

let dir: string;
let server: ServerProcess;
let port: number;
let a: { slug: string; key: string };
let b: { slug: string; key: string };

beforeAll(async () => {
  dir = tempDir("importd-isolation-uploads-");
  // As variables, not flags: so that the same test runs against a server without these options, and shows the attack.
  server = await spawnServer(
    dir,
    ["--workers", "2"],
    30_000,
    withTestHooks({ IMPORTD_MAX_BODY_BYTES: String(uploadMb * megabyte), IMPORTD_BODY_BUDGET_BYTES: String(budgetBytes), IMPORTD_BODY_STALL_SECONDS: String(stallSeconds), MIMALLOC_PURGE_DELAY: "0" }),
  );
  port = Number(new URL(server.url).port);
  a = { slug: "default", key: server.firstRunKey! };
  expect((await importd(["env", "create", "tenant-b", "--data-dir", dir])).code).toBe(0);
  b = { slug: "tenant-b", key: (await importd(["key", "create", "tenant-b", "--data-dir", dir])).stdout.trim() };
}, 60_000);

afterAll(async () => {
  server?.proc.kill("SIGKILL");
  await server?.proc.exited;
  rmSync(dir, { recursive: true, force: true });
});

const rssMb = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${server.proc.pid}/status`, "utf8"))?.[1] ?? 0) / 1024;

const importOf = (environment: { slug: string; key: string }, records: unknown[]) =>
  fetch(`${server.url}/${environment.slug}/v2/assets`, {
    method: "POST",
    headers: { "api-key": environment.key, "content-type": "application/json" },
    body: JSON.stringify(records),
  });

test(`${uploads} stalled uploads of ${uploadMb} MB in one environment: the server's memory stays bounded, health checks answer, another environment's import is 202 within seconds`, async () => {
  // Warm: the worker threads have parsed and stored a batch, as on a server that has been serving.
  expect((await importOf(b, [asset(1)])).status).toBe(202);
  await Bun.sleep(500);
  const beforeMb = rssMb();
  let peakMb = beforeMb;
  const sampler = setInterval(() => (peakMb = Math.max(peakMb, rssMb())), 25);

  const declaredBytes = uploadMb * megabyte;
  const sentBytes = Math.floor(declaredBytes * 0.85);
  const piece = Buffer.alloc(256 * 1024, 0x20);
  piece[0] = 0x5b; // "[": the body starts as a batch would
  const attack: OpenRequest[] = await Promise.all(
    Array.from({ length: uploads }, () =>
      openRequest(port, `POST /${a.slug}/v2/assets HTTP/1.1\r\nHost: importd\r\nApi-Key: ${a.key}\r\nContent-Type: application/json\r\nContent-Length: ${declaredBytes}\r\n\r\n`),
    ),
  );
  // Most of each body, as fast as the server takes it; a refused upload's client stops once it has its answer.
  await Promise.all(
    attack.map(async (request) => {
      for (let sent = 0; sent < sentBytes && !request.answered; sent += piece.length) await request.write(piece);
    }),
  );
  // The last bytes reach the server and are held; then they stall.
  await Bun.sleep(1000);
  clearInterval(sampler);
  peakMb = Math.max(peakMb, rssMb());

  // Meanwhile: health checks and another environment's import.
  const healthStartedAt = Date.now();
  const [healthz, readyz] = await Promise.all([fetch(`${server.url}/healthz`), fetch(`${server.url}/readyz`)]);
  const healthMs = Date.now() - healthStartedAt;
  const importStartedAt = Date.now();
  const other = await importOf(b, [asset(2), asset(3)]);
  const otherMs = Date.now() - importStartedAt;
  const refused = attack.filter((request) => request.answered).length;
  console.log(
    `${uploads} stalled uploads of ${uploadMb} MB (${Math.round(sentBytes / megabyte)} MB sent each), budget ${budgetBytes / megabyte} MB: ` +
      `server RSS ${beforeMb.toFixed(0)} MB before, peak ${peakMb.toFixed(0)} MB (+${(peakMb - beforeMb).toFixed(0)} MB); ${refused} refused at once; ` +
      `health checks ${healthMs} ms; tenant-b's import ${other.status} in ${otherMs} ms`,
  );
  expect(healthz.status).toBe(200);
  expect(readyz.status).toBe(200);
  expect(healthMs).toBeLessThan(2000);
  expect(other.status).toBe(202);
  expect(otherMs).toBeLessThan(5000);
  // The body admitted (A's share, half the budget), as much again in the chunks it was read from until the collector
  // runs, and a little more; before, every upload held its whole declared length (and its chunks).
  expect(peakMb - beforeMb).toBeLessThan((2 * budgetBytes) / 2 / megabyte + 32);
  expect(refused).toBeGreaterThanOrEqual(uploads - 1);

  // The refused ones had 429 with Retry-After at once; the stalled one is cut off with 408 after --body-stall-seconds, and its
  // connection closed.
  const answers = await Promise.all(attack.map((request) => Promise.race([request.response, Bun.sleep((stallSeconds + 10) * 1000).then(() => undefined)])));
  expect(answers.map((answer) => answer?.status).sort()).toEqual([408, ...Array(uploads - 1).fill(429)]);
  const cutOff = attack[answers.findIndex((answer) => answer?.status === 408)]!;
  await cutOff.answer;
  expect(cutOff.closed).toBe(true);
  for (const request of attack) request.close();
}, 120_000);
