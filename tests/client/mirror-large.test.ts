import { afterAll, beforeAll, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { importd } from "../helpers/process";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";

// The check of the mirror at scale, as a user runs it: `importd import --mirror` of a 100k-row CSV that drops
// 5% of the rows. The dry run's count is exact and deletes nothing; the mirror deletes exactly those rows (their
// tombstones say so, and which job); a second mirror of the same file deletes nothing. MIRROR_ROWS scales it (the
// default is the 100,000).

const rows = Number(process.env.MIRROR_ROWS ?? 100_000);

let server: TestServer;
const dir = tempDir("importd-mirror-large-");
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const id = (n: number) => `SA-${String(n).padStart(7, "0")}`;
const all = Array.from({ length: rows }, (_, n) => n);
// Every twentieth row is gone from the source: 5%.
const dropped = all.filter((n) => n % 20 === 7).map(id);
const csv = (name: string, numbers: number[]) => {
  const path = join(dir, name);
  writeFileSync(path, ["id,name", ...numbers.map((n) => `${id(n)},Sub area ${n}`)].join("\n"));
  return path;
};
const run = async (file: string, extra: string[] = []) => {
  const ran = await importd(["import", file, "--resource", "subareas", "--base-url", server.base, ...extra], { IMPORTD_API_KEY: server.key });
  expect({ code: ran.code, stderr: ran.stderr }).toEqual({ code: 0, stderr: expect.not.stringContaining("importd:") });
  return ran.stdout;
};
/** The count a mirror's last line says: `Deleted N` or `Would delete N`, and its job. */
const said = (stdout: string, verb: string) => {
  const line = new RegExp(`Mirror(?:, dry run)? \\(sync \\d+, job (\\d+)\\): .*${verb} ([\\d,]+) of`).exec(stdout);
  expect(line).not.toBeNull();
  return { job: Number(line![1]), count: Number(line![2]!.replaceAll(",", "")) };
};
const stored = async () => Number((await server.query<{ n: number }>("SELECT count(*) AS n FROM sub_areas"))[0]!.n);

test(`importd import --mirror of a ${rows.toLocaleString("en-US")}-row CSV that drops 5%: the dry run's count is exact, the mirror deletes exactly those rows, a second mirror deletes nothing`, async () => {
  await run(csv("all.csv", all));
  const source = csv("source.csv", all.filter((n) => n % 20 !== 7));

  const dryRun = said(await run(source, ["--mirror", "--dry-run"]), "Would delete");
  expect(dryRun.count).toBe(dropped.length);
  expect(await stored()).toBe(rows);

  const mirror = said(await run(source, ["--mirror"]), "Deleted");
  expect(mirror.count).toBe(dropped.length);
  expect(await stored()).toBe(rows - dropped.length);
  // Exactly the dropped rows: their tombstones, page by page, each by the mirror's completion.
  const deleted: string[] = [];
  for (let after: string | null = "0"; after !== null; ) {
    const page: { items: Array<{ id: string; deletedByJobId: number }>; nextCursor: string | null } = await (
      await fetch(`${server.base}/v2/deletions/subareas?limit=1000&after=${after}`, { headers: { "api-key": server.key } })
    ).json();
    for (const item of page.items) {
      expect(item.deletedByJobId).toBe(mirror.job);
      deleted.push(item.id);
    }
    after = page.nextCursor;
  }
  expect(deleted.sort()).toEqual(dropped);

  expect(said(await run(source, ["--mirror"]), "Deleted").count).toBe(0);
  expect(await stored()).toBe(rows - dropped.length);
}, 600_000);
