import { failureWindowMs, type FailureLog } from "../../access/failure-limiter";
import type { Sql } from "./connection";
import { answer } from "./faults";

/** Failed authentications in the database, so that every instance counts every instance's (FailureLimiter). */
export class PostgresFailureLog implements FailureLog {
  private added = 0;

  constructor(private readonly sql: Sql) {}

  // Another instance may have counted one just now: always look.
  readonly empty = false;

  recent(client: string, since: number, limit: number): Promise<number[]> {
    return answer(async () => {
      const rows = await this.sql`
        SELECT failed_at AS "at" FROM auth_failures WHERE client = ${client} AND failed_at > ${since}
        ORDER BY failed_at DESC LIMIT ${limit}`;
      return rows.map((row) => row.at as number).reverse();
    });
  }

  add(client: string, at: number): Promise<void> {
    return answer(async () => {
      await this.sql`INSERT INTO auth_failures (client, failed_at) VALUES (${client}, ${at})`;
      // Rows past the window count no more: every 100th failure of this instance clears them, so that a flood
      // from many addresses does not grow the table.
      if (++this.added % 100 === 1) await this.sql`DELETE FROM auth_failures WHERE failed_at <= ${at - failureWindowMs}`;
    });
  }
}
