import type { ReplyMessage, TaskMessage, TaskType, TaskTypes, ToWorker } from "./protocol";

/** The worker thread died (or threw outside a task) while running the task; the task may be retried. */
export class WorkerCrashed extends Error {
  readonly retryable = true;
}

/** The task itself threw inside the worker; `code` carries SQLite's error code when there is one. */
export class TaskFailed extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

/**
 * Where a task runs. `prefer`: the slot to run on if it is free, because it holds something the task can
 * use (a batch it has already parsed). `onSlot`: told the slot the task was given to.
 */
export type Placement = { prefer?: number; onSlot?: (slot: number) => void };

type Pending = {
  message: TaskMessage;
  transfer: Transferable[];
  placement?: Placement;
  resolve: (output: unknown) => void;
  reject: (error: Error) => void;
};

const maxFailedStarts = 3;
const closeThreadTimeoutMs = 2_000;

type Slot = { worker: Worker; ready: boolean; dead?: boolean; current?: Pending; onClosed?: () => void };

/**
 * A fixed set of Bun Worker threads fed from one FIFO queue. A worker that dies is replaced at once;
 * the task it was running is rejected with WorkerCrashed so that its owner can decide to retry.
 */
export class WorkerPool {
  private readonly slots: Slot[] = [];
  private readonly queue: Pending[] = [];
  private nextTaskId = 1;
  private closing = false;
  // Threads that died before they were ready, in a row: a thread that cannot even start (a missing entry,
  // an unreadable database) must not be respawned in a tight loop, and must fail the server's start.
  private failedStarts = 0;
  private lastStartFailure = "";
  private readonly entry: URL;
  private readonly dataDir: string;
  private readonly onCrash: (error: unknown) => void;

  constructor(options: { entry: URL; size: number; dataDir: string; onCrash?: (error: unknown) => void }) {
    this.entry = options.entry;
    this.dataDir = options.dataDir;
    this.onCrash = options.onCrash ?? (() => {});
    for (let i = 0; i < options.size; i++) this.slots.push(this.spawn());
  }

  get size(): number {
    return this.slots.length;
  }

  /** Resolves once every thread has opened the database; rejects if threads keep dying before that. */
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
      const message: TaskMessage = { type: "task", taskId: this.nextTaskId++, task, input };
      this.queue.push({ message, transfer, placement, resolve: resolve as (output: unknown) => void, reject });
      this.dispatch();
    });
  }

  /**
   * Takes no more tasks, lets the running ones finish for up to `graceMs`, then has each thread close its
   * database connection and ends it. Resolves to the number of tasks cut short: a thread ended mid-task
   * leaves its transaction uncommitted, so SQLite rolls it back and nothing of it is kept.
   */
  async close(graceMs = 0): Promise<number> {
    this.closing = true;
    for (const pending of this.queue.splice(0)) pending.reject(new WorkerCrashed("the worker pool is shutting down"));
    const deadline = Date.now() + graceMs;
    while (this.slots.some((slot) => slot.current) && Date.now() < deadline) await Bun.sleep(10);
    const cut = this.slots.filter((slot) => slot.current).length;
    await Promise.all(this.slots.map((slot) => (slot.current || !slot.ready || slot.dead ? slot.worker.terminate() : this.closeThread(slot))));
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
    const slot: Slot = { worker, ready: false };
    worker.onmessage = (event: MessageEvent<ReplyMessage>) => this.onReply(slot, event.data);
    worker.onerror = (event) => {
      event.preventDefault?.();
      this.replace(slot, event.message ?? "worker error");
    };
    worker.addEventListener("close", () => this.replace(slot, "worker exited"));
    worker.postMessage({ type: "init", dataDir: this.dataDir });
    return slot;
  }

  private onReply(slot: Slot, reply: ReplyMessage): void {
    if (reply.type === "ready") {
      slot.ready = true;
      this.failedStarts = 0;
    } else if (reply.type === "closed") {
      slot.onClosed?.();
      return;
    } else {
      const pending = slot.current;
      slot.current = undefined;
      if (pending && pending.message.taskId === reply.taskId) {
        if (reply.type === "done") pending.resolve(reply.output);
        else pending.reject(new TaskFailed(reply.message, reply.code));
      }
    }
    this.dispatch();
  }

  private replace(slot: Slot, reason: string): void {
    const index = this.slots.indexOf(slot);
    // A dying thread can report both an error and its exit: replace it once.
    if (index === -1 || this.closing || slot.dead) return;
    slot.dead = true;
    slot.worker.terminate();
    const pending = slot.current;
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
    pending?.reject(new WorkerCrashed(`worker thread crashed: ${reason}`));
  }

  // A task goes to the slot it prefers when that one is free; every other task, in FIFO order, to any free slot.
  // Never waiting for a busy preferred slot: re-parsing a batch costs less than waiting out another intake.
  private dispatch(): void {
    for (let i = 0; i < this.queue.length; ) {
      const prefer = this.queue[i]!.placement?.prefer;
      const slot = prefer === undefined ? undefined : this.slots[prefer];
      if (slot && slot.ready && !slot.current) this.start(prefer!, this.queue.splice(i, 1)[0]!);
      else i++;
    }
    this.slots.forEach((slot, index) => {
      if (this.queue.length > 0 && slot.ready && !slot.current) this.start(index, this.queue.shift()!);
    });
  }

  private start(index: number, pending: Pending): void {
    const slot = this.slots[index]!;
    slot.current = pending;
    pending.placement?.onSlot?.(index);
    slot.worker.postMessage(pending.message, pending.transfer);
  }
}
