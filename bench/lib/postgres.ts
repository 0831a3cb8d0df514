/**
 * PostgreSQL for the benchmarks: one throwaway server started the way the tests start theirs
 * (tests/helpers/postgres.ts: a temp directory, a free port, fsync off), a fresh importd-migrated database per
 * measurement, and importd instances sharing one database.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { postgresAvailable, postgresServer } from "../../tests/helpers/postgres";
import { freshPostgresDatabase } from "../../tests/helpers/postgres-store";
import { startBenchServer, type BenchServer } from "./server";
import { cpuMsOf } from "./stats";

export { postgresAvailable };

let started = false;

/** Runs `fn` on a fresh, migrated, empty database, dropped afterwards (100k assets each: keep the disk clean). */
export async function withFreshDatabase<T>(fn: (url: string) => Promise<T>): Promise<T> {
  if (!started) {
    started = true;
    process.once("SIGINT", () => void stopPostgres().finally(() => process.exit(130)));
  }
  const database = await freshPostgresDatabase();
  try {
    return await fn(database.url);
  } finally {
    await database.drop();
  }
}

/**
 * Stops the PostgreSQL server the bench started, if any, and waits until it is gone. The helper stops it only
 * in an exit handler, by signalling the `runuser` it runs under as root, which does not pass the signal on: the
 * server outlived the bench by up to a minute, until it found its data directory removed.
 */
export async function stopPostgres(): Promise<void> {
  if (!started) return;
  started = false;
  const server = await postgresServer();
  const [setting] = await server.admin((sql) => sql`SHOW data_directory`);
  const postmasterPid = Number(readFileSync(join(setting!.data_directory as string, "postmaster.pid"), "utf8").split("\n")[0]);
  // Fast shutdown: the databases are thrown away anyway, and it ends every connection at once.
  process.kill(postmasterPid, "SIGINT");
  const deadline = Date.now() + 10_000;
  while (existsSync(`/proc/${postmasterPid}`) && Date.now() < deadline) await Bun.sleep(50);
}

/**
 * `count` importd instances on one database, each with `workersEach` worker threads. The first creates the
 * environment, prints its key and imports the reference data before the others start, so that they all serve
 * the same `default`.
 */
export async function withInstances<T>(url: string, count: number, workersEach: number, fn: (servers: BenchServer[]) => Promise<T>): Promise<T> {
  const args = ["--database-url", url, "--workers", String(workersEach)];
  const servers = [await startBenchServer(args)];
  try {
    const others = await Promise.allSettled(Array.from({ length: count - 1 }, () => startBenchServer(args, servers[0]!.key)));
    for (const started of others) if (started.status === "fulfilled") servers.push(started.value);
    const failed = others.find((started) => started.status === "rejected");
    if (failed) throw failed.reason;
    return await fn(servers);
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
  }
}

/**
 * CPU time (ms) used so far by the PostgreSQL backends serving the database of `url`: each is a process of its
 * own, titled "postgres: <user> <database> <client> <state>". A backend that has exited no longer counts.
 */
export function backendsCpuMs(url: string): number {
  const database = new URL(url).pathname.slice(1);
  let ms = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let title: string;
    try {
      title = readFileSync(`/proc/${entry}/cmdline`, "utf8");
    } catch {
      continue;
    }
    if (title.startsWith("postgres: ") && title.split(" ")[2] === database) ms += cpuMsOf(Number(entry));
  }
  return ms;
}
