import { failureWindowMs, type FailureLog } from "../ports";
import { statement, type Queryable } from "./connection";
import { answer } from "./faults";

const recentFailures = statement(`SELECT failed_at AS "at" FROM auth_failures WHERE client = $1 AND failed_at > $2 ORDER BY failed_at DESC LIMIT $3`);
const addFailure = statement(`INSERT INTO auth_failures (client, failed_at) VALUES ($1, $2)`);
const forgetFailures = statement(`DELETE FROM auth_failures WHERE failed_at <= $1`);

/** Failed authentications in the database, so that every instance counts every instance's (FailureLimiter). */
export class PostgresFailureLog implements FailureLog {
  private added = 0;

  constructor(private readonly database: Queryable) {}

  // Another instance may have counted one just now: always look.
  readonly empty = false;

  recent(client: string, since: number, limit: number): Promise<number[]> {
    return answer(async () => (await this.database.query<{ at: number }>(recentFailures(client, since, limit))).map((row) => row.at).reverse());
  }

  add(client: string, at: number): Promise<void> {
    return answer(async () => {
      await this.database.query(addFailure(client, at));
      // Rows past the window count no more: every 100th failure of this instance clears them, so that a flood from
      // many addresses does not grow the table.
      if (++this.added % 100 === 1) await this.database.query(forgetFailures(at - failureWindowMs));
    });
  }
}
