import { until } from "./until";
import { expect } from "bun:test";

export type JobDocument = {
  id: number;
  importJobType: string;
  importJobStatus: string;
  statusUrl: string;
  output: null | { message: string; total: number; applied: number; rejected: number; errors: Array<{ index: number; id: string; field: string; message: string }>; canceled?: true };
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
  recordCount: number;
};

export const terminal = new Set(["Succeeded", "PartiallySucceeded", "Failed"]);

/** `tls`: for https:// to a server whose certificate the test process does not trust by itself, the authority to trust. */
export type Trust = { tls?: { ca: string } };

export function postJson(base: string, resource: string, key: string | undefined, body: unknown, headers: Record<string, string> = {}, trust: Trust = {}) {
  return fetch(`${base}/v2/${resource}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(key ? { "api-key": key } : {}), ...headers },
    body: typeof body === "string" || body instanceof Uint8Array ? (body as BodyInit) : JSON.stringify(body),
    ...trust,
  } as RequestInit);
}

export async function importBatch(base: string, resource: string, key: string, records: unknown[], trust: Trust = {}): Promise<JobDocument> {
  const response = await postJson(base, resource, key, records, {}, trust);
  const body = await response.json();
  if (response.status !== 202) throw new Error(`expected 202, got ${response.status}: ${JSON.stringify(body).slice(0, 500)}`);
  return body as JobDocument;
}

export async function getJob(base: string, key: string, id: number, trust: Trust = {}): Promise<JobDocument> {
  const response = await fetch(`${base}/v2/status/${id}`, { headers: { "api-key": key }, ...trust } as RequestInit);
  expect(response.status).toBe(200);
  return (await response.json()) as JobDocument;
}

/** Polls until the job is terminal; fails the test after `timeoutMs`. */
export async function waitForJob(base: string, key: string, id: number, timeoutMs = 60_000, trust: Trust = {}): Promise<JobDocument> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await getJob(base, key, id, trust);
    if (terminal.has(job.importJobStatus)) return job;
    if (Date.now() > deadline) throw new Error(`job ${id} still ${job.importJobStatus} after ${timeoutMs} ms`);
    await Bun.sleep(20);
  }
}

export async function importAndWait(base: string, resource: string, key: string, records: unknown[]) {
  const accepted = await importBatch(base, resource, key, records);
  return waitForJob(base, key, accepted.id);
}

/** Until the server at `url` holds `count` long polls (its metrics say so): what the test does next is after they wait. */
export async function heldPolls(url: string, count: number, deadlineMs = 10_000): Promise<void> {
  const held = async () => Number(/^importd_held_polls (\d+)/m.exec(await (await fetch(`${url}/metrics`)).text())?.[1] ?? 0);
  await until(held, { holds: (n) => n === count, what: `${count} polls held by ${url}`, deadlineMs });
}
