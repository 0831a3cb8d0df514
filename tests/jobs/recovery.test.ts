import { afterEach, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { AccessRepository } from "../../src/access/repository";
import { closeDatabase, migrate, openDatabase } from "../../src/db/client";
import { JobRepository } from "../../src/jobs/repository";
import { waitForJob } from "../helpers/api";
import { enqueueJob, startTestServer, tempDir, type TestServer } from "../helpers/server";

let server: TestServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe("crash recovery", () => {
  test("requeueInterrupted puts Processing jobs back to Pending and leaves the others alone", () => {
    const dir = tempDir();
    const db = openDatabase(dir);
    migrate(db);
    const access = new AccessRepository(db);
    const environment = access.createEnvironment("recover");
    const jobs = new JobRepository(db);
    const body = new TextEncoder().encode("[]");
    const interrupted = enqueueJob(jobs, environment.id, "SubArea", 1, body);
    const waiting = enqueueJob(jobs, environment.id, "SubArea", 1, body);
    jobs.claim(interrupted.id);
    expect(jobs.requeueInterrupted()).toBe(1);
    const after = jobs.list(environment.id, { limit: 10, retainedSince: "" });
    expect(after.map((job) => [job.id, job.status, job.startedAt])).toEqual([
      [waiting.id, "Pending", null],
      [interrupted.id, "Pending", null],
    ]);
    closeDatabase(db);
    rmSync(dir, { recursive: true, force: true });
  });

  test("a job left Processing by a crash is run again at start-up and finishes", async () => {
    const dir = tempDir();
    const db = openDatabase(dir);
    migrate(db);
    const access = new AccessRepository(db);
    access.createEnvironment("default");
    const key = access.createKey("default");
    const environmentId = access.findEnvironment("default")!.id;
    const jobs = new JobRepository(db);
    const body = new TextEncoder().encode(JSON.stringify([{ id: "north", name: "North" }, { id: "south", name: "South" }]));
    const job = enqueueJob(jobs, environmentId, "SubArea", 2, body);
    jobs.claim(job.id); // as if a worker had started it when the process died
    closeDatabase(db);

    server = await startTestServer({ dataDir: dir });
    const done = await waitForJob(`${server.url}/default`, key, job.id);
    expect(done.importJobStatus).toBe("Succeeded");
    expect(done.output?.applied).toBe(2);
    expect(server.logs.some((entry) => entry.msg === "requeued jobs interrupted by a previous stop")).toBe(true);
  });

  test("Pending jobs found at start-up are run in order", async () => {
    const dir = tempDir();
    const db = openDatabase(dir);
    migrate(db);
    const access = new AccessRepository(db);
    access.createEnvironment("default");
    const key = access.createKey("default");
    const environmentId = access.findEnvironment("default")!.id;
    const jobs = new JobRepository(db);
    const versions = [1, 2, 3].map((version) =>
      enqueueJob(jobs, environmentId, "SubArea", 1, new TextEncoder().encode(JSON.stringify([{ id: "north", name: `v${version}` }]))),
    );
    closeDatabase(db);

    server = await startTestServer({ dataDir: dir });
    for (const job of versions) expect((await waitForJob(`${server.url}/default`, key, job.id)).importJobStatus).toBe("Succeeded");
    const north = await (await fetch(`${server.url}/default/v2/subareas/north`, { headers: { "api-key": key } })).json();
    expect(north).toMatchObject({ name: "v3", lastJobId: versions[2]!.id });
  });
});

