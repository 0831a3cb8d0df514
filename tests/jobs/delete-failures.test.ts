import { afterEach, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { JobOperation } from "../../src/domain/job";
import { jobPayloads } from "../../src/store/sqlite/schema";
import type { SqliteStore } from "../../src/store/sqlite/store";
import { runEnvironment, sqliteStoreWith } from "../helpers/store";

// A delete job that fails as a whole (its payload lost, or given up after its attempts) reports a delete job's
// counts, deleted and notFound, never an import's created/updated/unchanged: readers (the CLI, the console,
// webhooks) tell a delete job by those fields.

let store: SqliteStore | undefined;
afterEach(async () => {
  await store?.close();
  store = undefined;
});

async function queuedDeletion(): Promise<number> {
  store = await sqliteStoreWith("deletes");
  const body = new TextEncoder().encode(JSON.stringify(["area-1", "area-2"]));
  const [queued] = await store.queue.enqueue([{ environmentId: 1, type: "SubArea", recordCount: 2, body, operation: JobOperation.Delete }]);
  return (queued as { job: { id: number } }).job.id;
}

const outputOf = async (jobId: number) => (await store!.jobs.find(1, jobId, ""))!.output!;

test("a delete job whose payload was lost fails with deleted and notFound 0, and no created/updated/unchanged", async () => {
  const jobId = await queuedDeletion();
  store!.db.delete(jobPayloads).where(eq(jobPayloads.jobId, jobId)).run();
  expect(await runEnvironment(store!.queue, 1)).toMatchObject([{ status: "Failed", applied: 0 }]);
  const output = await outputOf(jobId);
  expect(output).toMatchObject({ total: 2, applied: 0, rejected: 2, deleted: 0, notFound: 0 });
  expect(output.message).toContain("payload was lost");
  expect(Object.keys(output)).not.toContainAnyValues(["created", "updated", "unchanged"]);
});

test("a delete job given up after its attempts fails with deleted and notFound 0, and no created/updated/unchanged", async () => {
  const jobId = await queuedDeletion();
  // maxAttempts 0: its first claim is already one too many, as the fourth claim of a job that kept crashing is.
  expect(await runEnvironment(store!.queue, 1, { maxAttempts: 0 })).toMatchObject([{ status: "Failed", applied: 0 }]);
  const output = await outputOf(jobId);
  expect(output).toMatchObject({ total: 2, applied: 0, rejected: 2, deleted: 0, notFound: 0 });
  expect(output.message).toContain("could not be processed after");
  expect(Object.keys(output)).not.toContainAnyValues(["created", "updated", "unchanged"]);
});

test("an import given up the same way still reports created/updated/unchanged 0", async () => {
  store = await sqliteStoreWith("imports");
  const body = new TextEncoder().encode(JSON.stringify([{ id: "area-1", name: "Area" }]));
  const [queued] = await store.queue.enqueue([{ environmentId: 1, type: "SubArea", recordCount: 1, body }]);
  await runEnvironment(store.queue, 1, { maxAttempts: 0 });
  const output = await outputOf((queued as { job: { id: number } }).job.id);
  expect(output).toMatchObject({ created: 0, updated: 0, unchanged: 0 });
  expect(output.deleted).toBeUndefined();
});
