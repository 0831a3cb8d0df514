import pg from "pg";
import { types } from "../../src/store/postgres/connection";

/**
 * One connection for a test's own statements (an administrator's, another program's), with pg as importd uses it:
 * `` sql`SELECT … ${value}` `` sends the values as $1, $2, …; `unsafe` sends text as it is (several statements,
 * without values). bigint comes back as a number, as importd reads it. Connects on first use.
 */
export type TestSql = {
  <T = Record<string, any>>(strings: TemplateStringsArray, ...values: unknown[]): Promise<T[]>;
  unsafe<T = Record<string, any>>(text: string, values?: unknown[]): Promise<T[]>;
  /** The backend's process id (connected). */
  pid(): Promise<number>;
  end(): Promise<void>;
};

export function testSql(url: string, { applicationName = "tests" } = {}): TestSql {
  const client = new pg.Client({ connectionString: url, application_name: applicationName, types });
  // A connection the test ends on purpose (or PostgreSQL ends under it) must not end the test process.
  client.on("error", () => {});
  let connected: Promise<unknown> | undefined;
  const run = async <T>(text: string, values?: unknown[]): Promise<T[]> => {
    await (connected ??= client.connect());
    return (await client.query(values && values.length > 0 ? { text, values } : text)).rows as T[];
  };
  const sql = (<T>(strings: TemplateStringsArray, ...values: unknown[]) =>
    run<T>(
      strings.reduce((text, part, index) => `${text}$${index}${part}`),
      values,
    )) as TestSql;
  sql.unsafe = run;
  sql.pid = async () => ((await run<{ pid: number }>("SELECT pg_backend_pid() AS pid"))[0]!.pid);
  sql.end = () => client.end().catch(() => {});
  return sql;
}
