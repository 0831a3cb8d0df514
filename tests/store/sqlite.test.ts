import { expect, test } from "bun:test";
import { Access } from "../../src/access/access";
import { groupLimits } from "../../src/jobs/apply";
import { SqliteStore } from "../../src/store/sqlite/store";
import { outboxRows } from "../../src/webhooks/outbox";
import { tempDir } from "../helpers/server";
import { storeContract } from "./contract";

// Each test a fresh database file in its own temp directory.
storeContract("SQLite", async () => SqliteStore.open(tempDir(), { outbox: outboxRows }));

// One process owns an SQLite store: at its start, the runs its previous life left Processing go back to Pending.
test("SQLite: start-up recovery puts the jobs of interrupted runs back to Pending, keeping their attempts", async () => {
  const store = SqliteStore.open(tempDir(), { outbox: outboxRows });
  const environment = await new Access(store.access).createEnvironment("one");
  const body = new TextEncoder().encode(JSON.stringify([{ id: "a", name: "A" }]));
  const answers = await store.queue.enqueue([1, 2].map(() => ({ environmentId: environment.id, type: "SubArea", recordCount: 1, body })));
  await store.queue.claimRun({ token: "cut-short", environmentId: environment.id }, groupLimits);
  expect(await store.queue.recoverInterrupted()).toBe(2);
  for (const answer of answers) {
    expect(await store.jobs.find(environment.id, answer.conflict ? 0 : answer.job.id, "")).toMatchObject({ status: "Pending", attempts: 1, startedAt: null });
  }
  await store.close();
});
