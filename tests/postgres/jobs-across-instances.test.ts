import { afterAll, expect, test } from "bun:test";
import { importBatch, type JobDocument } from "../helpers/api";
import { requirePostgres } from "../helpers/postgres";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { startTestServer, type TestServer } from "../helpers/server";

// The jobs API across instances: a long poll held by one instance is answered within milliseconds of the job's
// end when another instance ran it (its NOTIFY after the commit), not when the wait is over; a cancel sent to one
// instance races the runs of both, and exactly one of them wins.

if (requirePostgres("the jobs API across instances")) {
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  test("jobs posted to one instance, polled with Prefer: wait on the other: each answered as soon as it ends", async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    const start = async () => {
      const server: TestServer = await startTestServer({ databaseUrl: database.url });
      cleanups.push(server.close);
      return server;
    };
    const a = await start();
    const b = await start();
    const lags: number[] = [];
    for (let i = 0; i < 20; i++) {
      const job = await importBatch(a.base, "subareas", a.key, [{ id: `s${i}`, name: `Sub-area ${i}` }]);
      const response = await fetch(`${b.url}/default/v2/status/${job.id}`, { headers: { "api-key": a.key, prefer: "wait=10" } });
      const answeredAt = Date.now();
      const done = (await response.json()) as JobDocument;
      expect(done.importJobStatus).toBe("Succeeded");
      lags.push(answeredAt - Date.parse(done.completedAt!));
    }
    lags.sort((x, y) => x - y);
    console.log(`long polls on the other instance: answered at most ${lags.at(-1)} ms after the job's end (median ${lags[10]} ms)`);
    expect(lags.at(-1)!).toBeLessThan(1_000);
  }, 120_000);

  test("a cancel on one instance against the runs of two: either the job is canceled and nothing of it applied, or it runs and the cancel is refused", async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(database.drop);
    // Two worker threads each, as every test server had before one became the default: the odds of a cancel landing
    // while the job still waits are this test's, and with one thread a run of 20 saw none.
    const a: TestServer = await startTestServer({ databaseUrl: database.url, workers: 2 });
    cleanups.push(a.close);
    const b: TestServer = await startTestServer({ databaseUrl: database.url, workers: 2 });
    cleanups.push(b.close);
    const outcomes = { canceled: 0, ran: 0 };
    for (let round = 0; round < 20; round++) {
      // A job queued behind a bigger one, canceled on the other instance a little later or sooner.
      await importBatch(a.base, "subareas", a.key, Array.from({ length: 500 }, (_, i) => ({ id: `bulk-${round}-${i}`, name: "Bulk" })));
      const job = await importBatch(a.base, "subareas", a.key, [{ id: `target-${round}`, name: "Target" }]);
      await Bun.sleep([0, 5, 10, 20, 40][round % 5]!);
      const answer = await fetch(`${b.base}/v2/status/${job.id}/cancel`, { method: "POST", headers: { "api-key": a.key } });
      const done = (await (await fetch(`${a.base}/v2/status/${job.id}`, { headers: { "api-key": a.key, prefer: "wait=30" } })).json()) as JobDocument;
      const applied = (await fetch(`${a.base}/v2/subareas/target-${round}`, { headers: { "api-key": a.key } })).status === 200;
      if (answer.status === 200) {
        outcomes.canceled++;
        expect({ status: done.importJobStatus, canceled: done.output?.canceled, applied }).toEqual({ status: "Failed", canceled: true, applied: false });
      } else {
        outcomes.ran++;
        expect(answer.status).toBe(409);
        expect({ status: done.importJobStatus, applied }).toEqual({ status: "Succeeded", applied: true });
      }
    }
    console.log(`cancel across instances: ${outcomes.canceled} canceled, ${outcomes.ran} ran`);
    expect(outcomes.canceled).toBeGreaterThan(0);
    expect(outcomes.ran).toBeGreaterThan(0);
  }, 120_000);
}
