import { describe, expect, test } from "bun:test";
import { checkDependencies, folderCycles, folderOf } from "./dependencies";

// `npm run lint:deps` runs in CI beside the typecheck; this runs it in `npm test` too, so that a layer crossed or a
// cycle between folders fails where the tests are run.

test("src/ keeps its layering: no rule of .dependency-cruiser.cjs is broken, and no folder of src/ imports one that imports it back", () => {
  const { ok, report } = checkDependencies();
  // The whole report, with each import to look at, as the failure's message.
  if (!ok) throw new Error(report);
  expect(ok).toBe(true);
}, 120_000);

describe("the folder check", () => {
  const graph = (edges: Record<string, string[]>) => new Map(Object.entries(edges).map(([from, tos]) => [from, new Map(tos.map((to) => [to, [`${from} -> ${to}`]]))]));

  test("finds each cycle between folders, however long, and nothing in a graph without one", () => {
    expect(folderCycles(graph({ store: ["domain"], jobs: ["store", "domain"], worker: ["jobs", "store"], domain: [] }))).toEqual([]);
    expect(folderCycles(graph({ store: ["jobs"], jobs: ["store"], domain: [] }))).toEqual([["jobs", "store"]]);
    expect(folderCycles(graph({ config: ["webhooks"], webhooks: ["log"], log: ["config"], http: ["webhooks"], store: ["jobs"], jobs: ["store"] }))).toEqual([
      ["config", "log", "webhooks"],
      ["jobs", "store"],
    ]);
  });

  test("takes a folder of src/ with its subfolders, and a file at the top of src/ as a layer of its own", () => {
    expect(folderOf("src/store/sqlite/jobs.ts")).toBe("store");
    expect(folderOf("src/config.ts")).toBe("config.ts");
    expect(folderOf("node_modules/elysia/dist/index.js")).toBeUndefined();
  });
});
