import { storageFault } from "../store/errors";
import type { Store } from "../store/ports";
import { grouping, type ReplyMessage, type TaskMessage, type TaskType, type TaskTypes, type ThreadTestHooks, type ToWorker } from "./protocol";

/** The worker thread died (or threw outside a task) while running the task; the task may be retried. */
export class WorkerCrashed extends Error {
  readonly retryable = true;
}

/** The task itself threw inside the worker (a storage fault rejects as the store's named error instead). */
export class TaskFailed extends Error {}

/** What the pool needs of the store: how each thread opens it, and what to tell it when a thread dies. */
export type ThreadStores = Pick<Store, "handleFor" | "threadDied">;

/**
 * Where a task runs. `prefer`: the slot to run on if it is free, because it holds something the task can
 * use (a batch it has already parsed). `light`: a task of a small job (see WorkerPool's `lightLane`).
 * `onSlot`: told the slot the task was given to.
 */
export type Placement = { prefer?: number; light?: boolean; onSlot?: (slot: number) => void };

type Pending = {
  task: TaskType;
  taskId: number;
  input: unknown;
  transfer: Transferable[];
  placement?: Placement;
  resolve: (output: unknown) => void;
  reject: (error: Error) => void;
};

const maxFailedStarts = 3;
const closeThreadTimeoutMs = 2_000;

// `running`: the tasks sent to the thread and not yet answered (several when grouped); `upkeep`: the thread does work of
// its own after answering them (see ReplyMessage). The slot is free when neither.
type Slot = { worker: Worker; threadNumber: number; ready: boolean; dead?: boolean; running: Pending[]; upkeep?: boolean; onClosed?: () => void };

/**
 * A fixed set of Bun Worker threads fed from one FIFO queue. A worker that dies is replaced at once;
 * the tasks it was running are rejected with WorkerCrashed so that their owners can decide to retry.
 * Queued tasks of a type in `grouping` go to a thread together, in one message.
 *
 * With `lightLane`, the first thread is the lane of small jobs: their tasks (`light`) wait for it rather than
 * go to another free thread, unless it is busy with a task that is not light (or not there at all), and the
 * other tasks take it last. On a store that takes one write at a time (SQLite), spreading a stream of small
 * jobs over threads bought nothing but their hand-offs: one thread doing all of their intakes and runs holds
 * every batch parsed, and used a third less CPU a job (docs/performance.md, "Round three, fifth part").
 */
export class WorkerPool {
  private readonly slots: Slot[] = [];
  private readonly queue: Pending[] = [];
  private nextTaskId = 1;
  // Each thread ever spawned has its own number, from 1 (the store may keep something per thread).
  private nextThreadNumber = 1;
  private closing = false;
  // Threads that died before they were ready, in a row: a thread that cannot even start (a missing entry,
  // an unreadable database) must not be respawned in a tight loop, and must fail the server's start.
  private failedStarts = 0;
  private lastStartFailure = "";
  private readonly entry: URL;
  private readonly stores: ThreadStores;
  private readonly lightLane: boolean;
  private readonly testHooks?: ThreadTestHooks;
  private readonly onCrash: (error: unknown) => void;

  constructor(options: { entry: URL; size: number; stores: ThreadStores; lightLane?: boolean; testHooks?: ThreadTestHooks; onCrash?: (error: unknown) => void }) {
    this.entry = options.entry;
    this.stores = options.stores;
    this.lightLane = options.lightLane ?? false;
    // Only the threads' own hooks are posted to them: config's others may be functions, which cannot be cloned across.
    const { killProcessOnRecordId, killProcessAfterCommitOnRecordId, maxAttempts } = options.testHooks ?? {};
    this.testHooks = options.testHooks && { killProcessOnRecordId, killProcessAfterCommitOnRecordId, maxAttempts };
    this.onCrash = options.onCrash ?? (() => {});
    for (let i = 0; i < options.size; i++) this.slots.push(this.spawn());
  }

  get size(): number {
    return this.slots.length;
  }

  /** Resolves once every thread has opened the store; rejects if threads keep dying before that. */
  async ready(): Promise<void> {
    while (this.slots.some((slot) => !slot.ready)) {
      if (this.failedStarts >= maxFailedStarts) throw new WorkerCrashed(`worker threads cannot start: ${this.lastStartFailure}`);
      await Bun.sleep(5);
    }
  }

  /** Threads started and not dead; a dying thread is replaced, so a shortfall is brief unless threads cannot start. */
  get readyWorkers(): number {
    return this.slots.filter((slot) => slot.ready && !slot.dead).length;
  }

  run<K extends TaskType>(task: K, input: TaskTypes[K]["input"], transfer: Transferable[] = [], placement?: Placement): Promise<TaskTypes[K]["output"]> {
    if (this.closing) return Promise.reject(new WorkerCrashed("the worker pool is shutting down"));
    return new Promise((resolve, reject) => {
      this.queue.push({ task, taskId: this.nextTaskId++, input, transfer, placement, resolve: resolve as (output: unknown) => void, reject });
      this.dispatch();
    });
  }

  /**
   * Takes no more tasks, lets the running ones finish for up to `graceMs`, then has each thread close its
   * store and ends it. Resolves to the number of tasks cut short: a thread ended mid-task leaves its
   * transaction uncommitted, so nothing of it is kept.
   */
  async close(graceMs = 0): Promise<number> {
    this.closing = true;
    for (const pending of this.queue.splice(0)) pending.reject(new WorkerCrashed("the worker pool is shutting down"));
    const deadline = Date.now() + graceMs;
    while (this.slots.some((slot) => slot.running.length > 0) && Date.now() < deadline) await Bun.sleep(10);
    const cut = this.slots.reduce((sum, slot) => sum + slot.running.length, 0);
    await Promise.all(this.slots.map((slot) => (slot.running.length > 0 || !slot.ready || slot.dead ? slot.worker.terminate() : this.closeThread(slot))));
    return cut;
  }

  private async closeThread(slot: Slot): Promise<void> {
    const closed = new Promise<void>((resolve) => (slot.onClosed = resolve));
    slot.worker.postMessage({ type: "close" } satisfies ToWorker);
    await Promise.race([closed, Bun.sleep(closeThreadTimeoutMs)]);
    slot.worker.terminate();
  }

  private spawn(): Slot {
    const worker = new Worker(this.entry);
    const slot: Slot = { worker, threadNumber: this.nextThreadNumber++, ready: false, running: [] };
    worker.onmessage = (event: MessageEvent<ReplyMessage>) => this.onReply(slot, event.data);
    worker.onerror = (event) => {
      event.preventDefault?.();
      this.replace(slot, event.message ?? "worker error");
    };
    worker.addEventListener("close", () => this.replace(slot, "worker exited"));
    worker.postMessage({ type: "init", store: this.stores.handleFor(slot.threadNumber), testHooks: this.testHooks } satisfies ToWorker);
    return slot;
  }

  private onReply(slot: Slot, reply: ReplyMessage): void {
    if (reply.type === "ready") {
      slot.ready = true;
      this.failedStarts = 0;
    } else if (reply.type === "closed") {
      slot.onClosed?.();
      return;
    } else if (reply.type === "upkeep") {
      slot.upkeep = true;
      return;
    } else if (reply.type === "idle") {
      slot.upkeep = false;
    } else {
      const index = slot.running.findIndex((pending) => pending.taskId === reply.taskId);
      if (index === -1) return;
      const [pending] = slot.running.splice(index, 1);
      if (reply.type === "done") pending!.resolve(reply.output);
      else pending!.reject(reply.fault ? storageFault(reply.fault, reply.message) : new TaskFailed(reply.message));
      if (slot.running.length > 0) return;
    }
    this.dispatch();
  }

  private replace(slot: Slot, reason: string): void {
    const index = this.slots.indexOf(slot);
    // A dying thread can report both an error and its exit: replace it once.
    if (index === -1 || this.closing || slot.dead) return;
    slot.dead = true;
    slot.worker.terminate();
    this.stores.threadDied(slot.threadNumber);
    const running = slot.running.splice(0);
    this.onCrash(new WorkerCrashed(reason));
    if (slot.ready) {
      this.slots[index] = this.spawn();
    } else {
      // The dead slot stays in place (not ready, so nothing is dispatched to it) until the backoff is over.
      this.lastStartFailure = reason;
      const delayMs = Math.min(5_000, 50 * 2 ** this.failedStarts++);
      setTimeout(() => {
        if (!this.closing && this.slots[index] === slot) this.slots[index] = this.spawn();
      }, delayMs);
    }
    for (const pending of running) pending.reject(new WorkerCrashed(`worker thread crashed: ${reason}`));
  }

  private isLight(pending: Pending): boolean {
    return this.lightLane && pending.placement?.light === true;
  }

  // A light task goes to the light lane when it is free, and waits for it while it runs light tasks. Any other task
  // goes to the slot it prefers when that one is free, then, in FIFO order, to any free slot (the light lane's
  // last). Never waiting for a busy preferred slot: re-parsing a batch costs less than waiting out another intake.
  // But a slot that is only doing its upkeep (a checkpoint) is waited for by the tasks that prefer it: a run after a
  // checkpoint, its batch held parsed, is what the slot did before it told of its upkeep.
  private dispatch(): void {
    // Ready, and no task of ours running there: free, unless it is doing its upkeep.
    const answered = (slot: Slot | undefined): slot is Slot => slot !== undefined && slot.ready && slot.running.length === 0;
    const free = (slot: Slot | undefined) => answered(slot) && !slot.upkeep;
    const waitsForUpkeep = (pending: Pending) => {
      const preferred = pending.placement?.prefer === undefined ? undefined : this.slots[pending.placement.prefer];
      return answered(preferred) && preferred.upkeep === true;
    };
    const lane = this.slots[0];
    // A dead thread is replaced by one not ready yet (see replace): not ready covers both.
    const laneTaken = () => !lane?.ready || lane.running.some((pending) => !this.isLight(pending));
    // The light lane last: it stays free for light tasks while another thread can take the rest.
    const order = this.lightLane ? [...this.slots.keys()].slice(1).concat(0) : [...this.slots.keys()];
    for (let i = 0; i < this.queue.length; ) {
      const pending = this.queue[i]!;
      if (this.isLight(pending)) {
        const slot = free(lane) ? 0 : laneTaken() ? order.find((index) => free(this.slots[index])) : undefined;
        if (slot !== undefined) this.start(slot, this.takeGroup(i));
        else i++;
        continue;
      }
      const prefer = pending.placement?.prefer;
      if (prefer !== undefined && free(this.slots[prefer])) this.start(prefer, this.takeGroup(i));
      else i++;
    }
    for (const index of order) {
      if (!free(this.slots[index])) continue;
      const next = this.queue.findIndex((pending) => !this.isLight(pending) && !waitsForUpkeep(pending));
      if (next === -1) break;
      this.start(index, this.takeGroup(next));
    }
  }

  // Takes the queued task at `index` out of the queue, with the later queued tasks of its type (and lane) that may go
  // along (see grouping), in queue order; stops at the first that would take the group past its byte limit.
  private takeGroup(index: number): Pending[] {
    const group = this.queue.splice(index, 1);
    const rule = grouping[group[0]!.task] as { maxTasks: number; maxBytes: number; bytes: (input: unknown) => number } | undefined;
    if (!rule) return group;
    let bytes = rule.bytes(group[0]!.input);
    for (let i = index; i < this.queue.length && group.length < rule.maxTasks; ) {
      const next = this.queue[i]!;
      if (next.task !== group[0]!.task || next.placement?.prefer !== undefined || this.isLight(next) !== this.isLight(group[0]!)) {
        i++;
        continue;
      }
      bytes += rule.bytes(next.input);
      if (bytes > rule.maxBytes) break;
      group.push(...this.queue.splice(i, 1));
    }
    return group;
  }

  private start(index: number, group: Pending[]): void {
    const slot = this.slots[index]!;
    slot.running = group;
    for (const pending of group) pending.placement?.onSlot?.(index);
    const message: TaskMessage = { type: "task", task: group[0]!.task, items: group.map(({ taskId, input }) => ({ taskId, input: input as never })) };
    slot.worker.postMessage(message, group.flatMap((pending) => pending.transfer));
  }
}
