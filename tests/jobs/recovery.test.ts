import { afterEach, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { Access } from "../../src/access/access";
import { groupLimits } from "../../src/jobs/apply";
import { SqliteStore } from "../../src/store/sqlite/store";
import { waitForJob } from "../helpers/api";
import { enqueueJob, startTestServer, tempDir, type TestServer } from "../helpers/server";

let server: TestServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe("crash recovery", () => {
  test("recoverInterrupted puts Processing jobs back to Pending and leaves the others alone", async () => {
    const dir = tempDir();
    const store = SqliteStore.open(dir);
    const environment = await new Access(store.access).createEnvironment("recover");
    const jobs = store.queue;
    const body = new TextEncoder().encode("[]");
    const interrupted = await enqueueJob(jobs, environment.id, "SubArea", 1, body);
    const waiting = await enqueueJob(jobs, environment.id, "SubArea", 1, body);
    await jobs.claimRun({ token: "interrupted", environmentId: environment.id, alone: true }, groupLimits);
    expect(await jobs.recoverInterrupted()).toBe(1);
    const after = await store.jobs.list(environment.id, { limit: 10, retainedSince: "" });
    expect(after.map((job) => [job.id, job.status, job.startedAt])).toEqual([
      [waiting.id, "Pending", null],
      [interrupted.id, "Pending", null],
    ]);
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A data directory whose store has the environment `default` and one key for it, as the CLI makes them. */
  async function storeWithDefaultEnvironment() {
    const dir = tempDir();
    const store = SqliteStore.open(dir);
    const access = new Access(store.access);
    await access.createEnvironment("default");
    const key = await access.createKey("default");
    const environmentId = (await access.findEnvironment("default"))!.id;
    return { dir, store, key, environmentId };
  }

  test("a job left Processing by a crash is run again at start-up and finishes", async () => {
    const { dir, store, key, environmentId } = await storeWithDefaultEnvironment();
    const jobs = store.queue;
    const body = new TextEncoder().encode(JSON.stringify([{ id: "north", name: "North" }, { id: "south", name: "South" }]));
    const job = await enqueueJob(jobs, environmentId, "SubArea", 2, body);
    await jobs.claimRun({ token: "died", environmentId, alone: true }, groupLimits); // as if a worker had started it when the process died
    await store.close();

    server = await startTestServer({ dataDir: dir });
    const done = await waitForJob(`${server.url}/default`, key, job.id);
    expect(done.importJobStatus).toBe("Succeeded");
    expect(done.output?.applied).toBe(2);
    expect(server.logs.some((entry) => entry.msg === "requeued jobs interrupted by a previous stop")).toBe(true);
  });

  test("Pending jobs found at start-up are run in order", async () => {
    const { dir, store, key, environmentId } = await storeWithDefaultEnvironment();
    const jobs = store.queue;
    const versions = [];
    for (const version of [1, 2, 3]) versions.push(await enqueueJob(jobs, environmentId, "SubArea", 1, new TextEncoder().encode(JSON.stringify([{ id: "north", name: `v${version}` }]))));
    await store.close();

    server = await startTestServer({ dataDir: dir });
    for (const job of versions) expect((await waitForJob(`${server.url}/default`, key, job.id)).importJobStatus).toBe("Succeeded");
    const north = await (await fetch(`${server.url}/default/v2/subareas/north`, { headers: { "api-key": key } })).json();
    expect(north).toMatchObject({ name: "v3", lastJobId: versions[2]!.id });
  });
});

