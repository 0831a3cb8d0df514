import { StorageUnavailable } from "../errors";
import { connect, type Sql } from "./connection";
import { endedTheConnection } from "./faults";

/**
 * Transactions, each on a connection of its own for as long as it is open. Written out as BEGIN/COMMIT on
 * one-connection pools rather than with the driver's begin() or reserve(): postgres.js 3.4 throws an
 * uncatchable TypeError from a timer when a statement is sent on a transaction whose connection has closed (by
 * idle_in_transaction_session_timeout, an administrator, a failover). Here a pool tells us at once that its
 * connection closed, and every statement after that in the transaction is refused (StorageUnavailable) instead
 * of being sent, where it would also have run outside the transaction, on a new connection: a run whose
 * connection was lost can commit nothing.
 *
 * A worker thread runs one task at a time, so it opens one such connection; `max` bounds them all the same.
 */
export class TransactionConnections {
  private readonly idle: Slot[] = [];
  private readonly all: Slot[] = [];
  private readonly waiting: Array<(slot: Slot) => void> = [];

  constructor(
    private readonly url: string,
    // The serving instance whose connections these are (see liveness.ts).
    private readonly instance?: string,
    private readonly max = 4,
  ) {}

  /** Opens a transaction on a free connection (waits for one when `max` are in use). */
  async begin(): Promise<Transaction> {
    const slot = await this.take();
    slot.lost = false;
    const transaction = new Transaction(slot.sql, () => slot.lost, (broken) => this.give(broken ? this.renewed(slot) : slot));
    try {
      await transaction.sql`BEGIN`;
    } catch (error) {
      await transaction.rollback();
      throw error;
    }
    return transaction;
  }

  private take(): Promise<Slot> {
    const idle = this.idle.pop();
    if (idle) return Promise.resolve(idle);
    if (this.all.length < this.max) {
      const slot: Slot = { lost: false } as Slot;
      this.connectSlot(slot);
      this.all.push(slot);
      return Promise.resolve(slot);
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private connectSlot(slot: Slot): void {
    // Only this pool's connection counts: a renewed slot's old pool closes later.
    const { sql } = connect(this.url, { max: 1, instance: this.instance, onclose: () => void (slot.sql === sql && (slot.lost = true)) });
    slot.sql = sql;
  }

  // A transaction whose connection failed under it: its pool may still hold that connection, half-open or still
  // connecting (postgres.js reconnects only after its timeout), so the slot gets a new pool and the old one goes.
  private renewed(slot: Slot): Slot {
    const old = slot.sql;
    this.connectSlot(slot);
    void old.end({ timeout: 0 }).catch(() => {});
    return slot;
  }

  private give(slot: Slot): void {
    const next = this.waiting.shift();
    if (next) next(slot);
    else this.idle.push(slot);
  }

  async close(): Promise<void> {
    await Promise.all(this.all.map((slot) => slot.sql.end({ timeout: 1 })));
  }
}

type Slot = { sql: Sql; lost: boolean };

export class Transaction {
  /** The transaction's statements: tagged templates and unsafe(), as on the driver's Sql. */
  readonly sql: Sql;
  private open = true;

  // A statement failed because the connection ended or never opened: nothing is left to roll back, and a
  // ROLLBACK would only make the pool connect again (and wait for that) to find no transaction.
  private broken = false;

  constructor(
    driver: Sql,
    private readonly lost: () => boolean,
    private readonly ended: (broken: boolean) => void,
  ) {
    const check = () => {
      if (!this.open) throw new Error("statement on a transaction that has ended");
      if (this.lost() || this.broken) throw new StorageUnavailable("the database connection of this transaction was lost; nothing of it was committed");
    };
    const guarded = ((strings: TemplateStringsArray, ...values: unknown[]) => {
      check();
      const made = (driver as unknown as (s: TemplateStringsArray, ...v: unknown[]) => Promise<unknown>)(strings, ...values);
      // A tagged template is a statement the caller runs: watched, not handled (the caller still gets the
      // error). Helpers such as tx(rows, columns) and the fragments unsafe() makes are not watched: watching runs
      // a query.
      if (Array.isArray(strings) && "raw" in strings) {
        made.catch((error) => {
          if (endedTheConnection(error)) this.broken = true;
        });
      }
      return made;
    }) as unknown as Sql;
    guarded.unsafe = ((query: string, parameters?: unknown[], options?: object) => {
      check();
      return driver.unsafe(query, parameters as never, options);
    }) as Sql["unsafe"];
    this.sql = guarded;
  }

  async commit(): Promise<void> {
    try {
      await this.sql`COMMIT`;
    } finally {
      this.end();
    }
  }

  /** Rolls back; on a lost connection there is nothing to roll back (PostgreSQL has). Never throws. */
  async rollback(): Promise<void> {
    try {
      if (this.open && !this.lost() && !this.broken) await this.sql`ROLLBACK`;
    } catch {
      // The connection went meanwhile: the transaction went with it.
    } finally {
      this.end();
    }
  }

  private end(): void {
    if (!this.open) return;
    this.open = false;
    this.ended(this.broken);
  }
}
