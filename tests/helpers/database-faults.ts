import { expect } from "bun:test";
import type { TestSql } from "./sql";
import { until } from "./until";

/** What the clients of underLoad saw. */
export type Answers = {
  /** How many requests got each status ("no answer" for those that got none in time). */
  statuses: Map<number | string, number>;
  /** The ids of the jobs accepted (202). */
  accepted: number[];
  /** The longest any request waited for its answer. */
  slowestMs: number;
  /** The longest any request waited for each status. */
  slowestBy: Map<number | string, number>;
};

/**
 * Four clients, each sending one-record imports to `base` and reading its last accepted job back, in turn, until
 * `disrupt` (something done to the database meanwhile, which waits on what the clients see so far) has resolved. Every request must be answered, 202 or 200, or
 * 503 with Retry-After (which a client sends again later); anything else fails at once, and a request unanswered
 * after `answerWithinMs` counts as "no answer".
 */
export async function underLoad(base: string, key: string, disrupt: (answers: Answers) => Promise<void>, { answerWithinMs, round = 0 }: { answerWithinMs: number; round?: number }): Promise<Answers> {
  const answers: Answers = { statuses: new Map(), accepted: [], slowestMs: 0, slowestBy: new Map() };
  let disrupting = true;
  const disrupted = disrupt(answers).finally(() => (disrupting = false));
  const ask = async (url: string, init: RequestInit = {}) => {
    const sentAt = performance.now();
    const response = await fetch(url, { ...init, headers: { "api-key": key, ...init.headers }, signal: AbortSignal.timeout(answerWithinMs) }).catch(() => undefined);
    const waitedMs = performance.now() - sentAt;
    const status = response?.status ?? "no answer";
    answers.slowestMs = Math.max(answers.slowestMs, waitedMs);
    answers.slowestBy.set(status, Math.max(answers.slowestBy.get(status) ?? 0, waitedMs));
    answers.statuses.set(status, (answers.statuses.get(status) ?? 0) + 1);
    if (response?.status === 503) expect(Number(response.headers.get("retry-after"))).toBeGreaterThan(0);
    else if (response && response.status !== 202 && response.status !== 200) throw new Error(`${init.method ?? "GET"} ${url}: ${response.status} ${await response.text()}`);
    return response?.ok ? ((await response.json()) as { id: number }) : undefined;
  };
  await Promise.all(
    Array.from({ length: 4 }, async (_, client) => {
      let last: number | undefined;
      for (let n = 0; disrupting; n++) {
        const job = await ask(`${base}/v2/subareas`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify([{ id: `r${round}-c${client}-${n}`, name: `n${n}` }]),
        });
        if (job) answers.accepted.push((last = job.id));
        if (last !== undefined) await ask(`${base}/v2/status/${last}`);
      }
    }),
  );
  await disrupted;
  return answers;
}

/** Waits until every one of `jobIds` is Succeeded, read in the database itself; fails after `withinMs`. */
export async function allSucceeded(admin: TestSql, jobIds: number[], withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const [{ left }] = (await admin`SELECT count(*)::int AS left FROM jobs WHERE id = ANY(${jobIds}) AND status <> 'Succeeded'`) as [{ left: number }];
    if (left === 0) return;
    if (Date.now() > deadline) throw new Error(`${left} of ${jobIds.length} accepted jobs not Succeeded ${withinMs} ms after the fault`);
    await Bun.sleep(100);
  }
}

/** Reads `url` until it answers 200 (a 503 while the instance has no connection is asked again); fails after `withinMs`. */
export async function answersAgain(url: string, key: string, withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  for (const answers: string[] = []; ; ) {
    const response = await fetch(url, { headers: { "api-key": key } });
    if (response.status === 200) return;
    answers.push(`${response.status} ${(await response.text()).slice(0, 200)}`);
    if (Date.now() > deadline) throw new Error(`${url} still does not answer ${withinMs} ms after the fault: ${answers.slice(-3).join(" | ")}`);
    await Bun.sleep(100);
  }
}

/** The process ids of the instance's connections (named "importd <instance id>") to the database `name`. */
export async function instanceBackends(admin: TestSql, name: string): Promise<number[]> {
  return (await admin<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE datname = ${name} AND application_name LIKE 'importd %'`).map((row) => row.pid);
}

/** How many requests got `status` so far. */
export const answered = (answers: Answers, status: number) => answers.statuses.get(status) ?? 0;

/** Waits until `count` more requests than now got `status`: the instance was seen to answer so after a change. */
export async function answeredAgain(answers: Answers, status: number, { count = 1, what, deadlineMs = 30_000 }: { count?: number; what: string; deadlineMs?: number }): Promise<void> {
  const before = answered(answers, status);
  await until(() => answered(answers, status) >= before + count, { what: `${count} more ${status} answers (${what})`, deadlineMs });
}
