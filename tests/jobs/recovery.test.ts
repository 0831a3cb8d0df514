import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { Access } from "../../src/access/access";
import { groupLimits } from "../../src/jobs/apply";
import { openStore } from "../../src/store/open";
import { outboxRows } from "../../src/webhooks/outbox";
import { waitForJob } from "../helpers/api";
import { freshPostgresDatabase } from "../helpers/postgres-store";
import { enqueueJob, startTestServer, tempDir, testBackend, type TestServer } from "../helpers/server";

let server: TestServer | undefined;
const drops: Array<() => Promise<void>> = [];
afterEach(async () => {
  await server?.close();
  server = undefined;
});
afterAll(async () => {
  for (const drop of drops) await drop();
});

describe("crash recovery", () => {
  /**
   * A store with the environment `default` and one key for it, as the CLI makes them, that a test server is then
   * started on: a data directory, or on PostgreSQL a database of its own.
   */
  async function storeWithDefaultEnvironment() {
    const dir = tempDir();
    const database = testBackend === "postgres" ? await freshPostgresDatabase() : undefined;
    if (database) drops.push(database.drop);
    const store = await openStore({ dataDir: dir, databaseUrl: database?.url }, { outbox: outboxRows });
    const access = new Access(store.access);
    await access.createEnvironment("default");
    const key = await access.createKey("default");
    const environmentId = (await access.findEnvironment("default"))!.id;
    const restart = () => startTestServer({ dataDir: dir, databaseUrl: database?.url });
    return { store, key, environmentId, restart };
  }

  test("a job left Processing by a crash is run again at start-up and finishes", async () => {
    const { store, key, environmentId, restart } = await storeWithDefaultEnvironment();
    const jobs = store.queue;
    const body = new TextEncoder().encode(JSON.stringify([{ id: "north", name: "North" }, { id: "south", name: "South" }]));
    const job = await enqueueJob(jobs, environmentId, "SubArea", 2, body);
    await jobs.claimRun({ token: "died", environmentId, alone: true }, groupLimits); // as if a worker had started it when the process died
    await store.close();

    server = await restart();
    const done = await waitForJob(`${server.url}/default`, key, job.id);
    expect(done.importJobStatus).toBe("Succeeded");
    expect(done.output?.applied).toBe(2);
    // SQLite puts it back to Pending at start-up (one process owns the file); PostgreSQL's next claim takes it over.
    if (testBackend === "sqlite") expect(server.logs.some((entry) => entry.msg === "requeued jobs interrupted by a previous stop")).toBe(true);
    expect((await server.query<{ attempts: number }>("SELECT attempts FROM jobs WHERE id = ?", job.id))[0]!.attempts).toBe(2);
  });

  test("Pending jobs found at start-up are run in order", async () => {
    const { store, key, environmentId, restart } = await storeWithDefaultEnvironment();
    const jobs = store.queue;
    const versions = [];
    for (const version of [1, 2, 3]) versions.push(await enqueueJob(jobs, environmentId, "SubArea", 1, new TextEncoder().encode(JSON.stringify([{ id: "north", name: `v${version}` }]))));
    await store.close();

    server = await restart();
    for (const job of versions) expect((await waitForJob(`${server.url}/default`, key, job.id)).importJobStatus).toBe("Succeeded");
    const north = await (await fetch(`${server.url}/default/v2/subareas/north`, { headers: { "api-key": key } })).json();
    expect(north).toMatchObject({ name: "v3", lastJobId: versions[2]!.id });
  });
});

