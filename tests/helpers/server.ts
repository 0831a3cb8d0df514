import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AccessRepository } from "../../src/access/repository";
import { loadConfig, type Config } from "../../src/config";
import { closeDatabase, openDatabase, type Db } from "../../src/db/client";
import { startServer, type RunningServer } from "../../src/server";

export const tempDir = (prefix = "importd-test-") => mkdtempSync(join(tmpdir(), prefix));

export type TestServer = RunningServer & {
  dataDir: string;
  /** The first-run key of the `default` environment. */
  key: string;
  /** Base URL of the `default` environment, e.g. http://127.0.0.1:1234/default */
  base: string;
  logs: Array<Record<string, unknown>>;
  /** A second connection to the same database file, as the CLI would have. */
  db(): Db;
  /** Creates an environment with one key, through the same code as the CLI. */
  addEnvironment(slug: string): { slug: string; key: string; base: string };
  close(): Promise<void>;
};

/** A real server on a free port, with its own temp data directory. */
export async function startTestServer(overrides: Partial<Config> = {}): Promise<TestServer> {
  const dataDir = overrides.dataDir ?? tempDir();
  const config = { ...loadConfig({}, {}), port: 0, host: "127.0.0.1", workers: 2, ...overrides, dataDir } as Config;
  const logs: Array<Record<string, unknown>> = [];
  const server = await startServer(Object.freeze(config), (entry) => logs.push(entry));
  let side: Db | undefined;
  const db = () => (side ??= openDatabase(dataDir));
  return {
    ...server,
    dataDir,
    key: server.firstRunKey!,
    base: `${server.url}/default`,
    logs,
    db,
    addEnvironment(slug) {
      const access = new AccessRepository(db());
      access.createEnvironment(slug);
      return { slug, key: access.createKey(slug), base: `${server.url}/${slug}` };
    },
    async close() {
      await server.stop();
      if (side) closeDatabase(side);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
