/// <reference lib="webworker" />
// Entry of a worker thread. It opens its own store; everything it does is caught and reported, so a task's
// failure never takes the thread down. A message's tasks fail together when its handler throws (for grouped
// intakes: their one transaction was not committed, so none of them was stored).
import { runNext } from "../jobs/apply";
import { acceptBatches } from "../jobs/intake";
import { resourceByPath } from "../resources/registry";
import { StorageError } from "../store/errors";
import { openStoreInThread } from "../store/open";
import type { Store } from "../store/ports";
import { outboxRows } from "../webhooks/outbox";
import { ParsedBatches } from "./parsed-batches";
import type { ReplyMessage, TaskMessage, TaskType, TaskTypes, ThreadTestHooks, ToWorker } from "./protocol";

declare const self: Worker;

// A handler takes every task of one message (one, unless its type is grouped) and answers each, in order.
type Handlers = { [K in TaskType]: (store: Store, inputs: Array<TaskTypes[K]["input"]>) => Promise<Array<TaskTypes[K]["output"]>> };
const oneByOne =
  <I, O>(handler: (store: Store, input: I) => Promise<O>) =>
  async (store: Store, inputs: I[]): Promise<O[]> => {
    const outputs: O[] = [];
    for (const input of inputs) outputs.push(await handler(store, input));
    return outputs;
  };

// Bodies' worth of accepted batches kept parsed until applied; the scheduler sends a run to the thread that accepted its job.
const parsedBatches = new ParsedBatches(64 * 1024 * 1024);
let testHooks: ThreadTestHooks = {};

const killProcessOn = (id: string) => (records: Array<{ id: string }>) => {
  if (records.some((record) => record.id === id)) process.kill(process.pid, "SIGKILL");
};

/** Notes that a run is about to apply a record with this id; `afterCommit` then kills the process, the run committed. */
function killAfterCommitOn(id: string) {
  let seen = false;
  return {
    inspect: (records: Array<{ id: string }>) => void (seen ||= records.some((record) => record.id === id)),
    afterCommit: () => seen && process.kill(process.pid, "SIGKILL"),
  };
}

const handlers: Handlers = {
  accept: async (store, inputs) => {
    const requests = inputs.map(({ environmentId, resource, body, idempotencyKey, dryRun, operation, syncId }) => {
      const definition = resourceByPath(resource);
      if (!definition) throw new Error(`unknown resource ${resource}`);
      return { environmentId, resource: definition, body: new Uint8Array(body), idempotencyKey, dryRun, operation, syncId };
    });
    return (await acceptBatches(store.queue, requests)).map(({ result, batch }, index) => {
      if (result.ok && batch) parsedBatches.add(result.job.id, batch, inputs[index]!.body.byteLength);
      return result;
    });
  },
  apply: oneByOne(async (store, { environmentId, token, takeOver }) => {
    const afterCommit = testHooks.killProcessAfterCommitOnRecordId === undefined ? undefined : killAfterCommitOn(testHooks.killProcessAfterCommitOnRecordId);
    const inspect = testHooks.killProcessOnRecordId === undefined ? afterCommit?.inspect : killProcessOn(testHooks.killProcessOnRecordId);
    const jobs = await runNext(store.queue, environmentId, { token, takeOver, parsed: (id) => parsedBatches.take(id), inspect, maxAttempts: testHooks.maxAttempts });
    afterCommit?.afterCommit();
    return { ran: jobs !== undefined, jobs: jobs ?? [] };
  }),
  purge: oneByOne(async (store, { before }) => ({ count: await store.queue.purge(before) })),
};

let store: Store | undefined;
const reply = (message: ReplyMessage) => self.postMessage(message);

self.onmessage = async (event: MessageEvent<ToWorker>) => {
  const message = event.data;
  if (message.type === "init") {
    store = await openStoreInThread(message.store, { outbox: outboxRows });
    testHooks = message.testHooks ?? {};
    reply({ type: "ready" });
    return;
  }
  if (message.type === "close") {
    await store?.close();
    store = undefined;
    reply({ type: "closed" });
    return;
  }
  const { task, items } = message as TaskMessage;
  try {
    if (!store) throw new Error("worker used before init");
    const outputs = await (handlers[task] as (store: Store, inputs: unknown[]) => Promise<unknown[]>)(store, items.map((item) => item.input));
    const upkeep = store.takeUpkeep?.();
    if (upkeep) reply({ type: "upkeep" });
    items.forEach(({ taskId }, index) => reply({ type: "done", taskId, output: outputs[index] }));
    if (upkeep) afterAnswers(upkeep);
  } catch (error) {
    const fault = error instanceof StorageError ? error.kind : undefined;
    for (const { taskId } of items) reply({ type: "error", taskId, message: (error as Error)?.message ?? String(error), fault });
  }
};

/** The store's upkeep, once the answers have gone; the pool gives this thread nothing until its `idle`. */
function afterAnswers(upkeep: () => void): void {
  try {
    upkeep();
  } catch {
    // The connection closed meanwhile (a stop), say: the next start's checkpoint does it.
  } finally {
    reply({ type: "idle" });
  }
}
