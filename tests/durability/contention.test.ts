import { afterAll, beforeAll, expect, test } from "bun:test";
import { importd, type Run } from "../helpers/process";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";
import { terminal, type JobDocument } from "../helpers/api";

// 50 clients post and poll across 5 environments while CLI processes write to the same database file.
// No lock ever reaches a client as a 5xx, and every job completes. The CLI runs 4 rounds of 6 commands on every
// landing, 8 in `npm run test:long` (CONTENTION_CLI_ROUNDS): each command is a process of its own (0.25 s of CPU), and
// the clients were done long before the eighth round (the log line says when each side ended).
const clientCount = 50;
const jobsPerClient = 3;
const cliRounds = Number(process.env.CONTENTION_CLI_ROUNDS ?? 4);

let server: TestServer;
const environments: Array<{ slug: string; key: string; base: string }> = [];
beforeAll(async () => {
  server = await startTestServer({ workers: 3 });
  for (let i = 0; i < 5; i++) environments.push(await server.addEnvironment(`load-${i}`));
  for (const environment of environments) await seedReferenceData(environment.base, environment.key);
});
afterAll(() => server.close());
// The CLI works on the server's store: its data directory, or its PostgreSQL database.
const storeArgs = () => (server.databaseUrl ? ["--database-url", server.databaseUrl] : ["--data-dir", server.dataDir]);

test(`${clientCount} clients posting and polling across 5 environments, with CLI writes meanwhile: no 5xx, every job completes`, async () => {
  const statuses = new Map<number, number>();
  const count = (status: number) => statuses.set(status, (statuses.get(status) ?? 0) + 1);
  const finished: JobDocument[] = [];

  const client = async (n: number) => {
    const environment = environments[n % environments.length]!;
    for (let round = 0; round < jobsPerClient; round++) {
      // Ids overlap between the clients of an environment, so their upserts hit the same rows.
      const size = 1 + ((n * 37 + round * 11) % 200);
      const records = Array.from({ length: size }, (_, i) => asset((n * 13 + round * 7 + i) % 500));
      const posted = await fetch(`${environment.base}/v2/assets`, {
        method: "POST",
        headers: { "content-type": "application/json", "api-key": environment.key },
        body: JSON.stringify(records),
      });
      count(posted.status);
      if (posted.status !== 202) throw new Error(`POST answered ${posted.status}: ${await posted.text()}`);
      const { id } = (await posted.json()) as JobDocument;
      for (;;) {
        const polled = await fetch(`${environment.base}/v2/status/${id}`, { headers: { "api-key": environment.key } });
        count(polled.status);
        if (polled.status !== 200) throw new Error(`status answered ${polled.status}: ${await polled.text()}`);
        const job = (await polled.json()) as JobDocument;
        if (terminal.has(job.importJobStatus)) {
          finished.push(job);
          break;
        }
        await Bun.sleep(10);
      }
    }
  };

  // The CLI, as an operator would use it during the load: new environments and keys, lists, revocations.
  const cliRuns: Array<{ args: string[]; run: Run }> = [];
  const cli = async () => {
    for (let i = 0; i < cliRounds; i++) {
      const steps = [["env", "create", `cli-${i}`], ["key", "create", `cli-${i}`], ["key", "create", environments[i % 5]!.slug], ["key", "list", environments[i % 5]!.slug], ["env", "list"]];
      for (const args of steps) cliRuns.push({ args, run: await importd([...args, ...storeArgs()]) });
      const created = cliRuns[cliRuns.length - 3]!.run.stdout.trim();
      const keyId = created.slice(created.lastIndexOf("_") + 1);
      cliRuns.push({ args: ["key", "revoke", keyId], run: await importd(["key", "revoke", keyId, ...storeArgs()]) });
    }
  };

  const started = performance.now();
  const secondsSince = () => (performance.now() - started) / 1000;
  let clientsSeconds = 0;
  let cliSeconds = 0;
  await Promise.all([
    Promise.all(Array.from({ length: clientCount }, (_, n) => client(n))).then(() => (clientsSeconds = secondsSince())),
    cli().then(() => (cliSeconds = secondsSince())),
  ]);

  for (const { args, run } of cliRuns) {
    expect({ args, code: run.code }).toEqual({ args, code: 0 });
    expect(run.stderr).not.toMatch(/SQLITE|locked|busy/i);
  }
  expect([...statuses.keys()].filter((status) => status >= 500)).toEqual([]);
  expect(finished).toHaveLength(clientCount * jobsPerClient);
  for (const job of finished) expect(job.importJobStatus).toBe("Succeeded");
  expect(server.logs.filter((entry) => entry.level === "error")).toEqual([]);
  console.log(
    `contention: ${clientCount} clients, ${finished.length} jobs Succeeded, ${[...statuses.values()].reduce((a, b) => a + b, 0)} requests ` +
      `(${[...statuses].map(([status, n]) => `${n}×${status}`).join(", ")}), ${cliRuns.length} CLI commands; the clients done in ${clientsSeconds.toFixed(1)} s, the CLI in ${cliSeconds.toFixed(1)} s`,
  );
}, 300_000);
