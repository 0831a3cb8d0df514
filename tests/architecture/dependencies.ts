// `npm run lint:deps`: the imports of src/ against the layering. dependency-cruiser checks the rules of
// .dependency-cruiser.cjs, file by file; from the same cruise, this works out the graph of src/'s folders and fails on
// any cycle in it (src/store/* -> src/jobs/* -> src/store/*), which no file-level rule sees. Exits non-zero, saying
// what and where, if either finds anything. In CI beside the typecheck (.ci/run), and in `npm test` through
// tests/architecture/dependencies.test.ts.
//
//   bun tests/architecture/dependencies.ts [--graph]
//
// --graph also prints the folder graph, each folder with the folders it imports.
import type { ICruiseResult } from "dependency-cruiser";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..");

/**
 * The layer a file of src/ belongs to: its folder under src/ (src/store/sqlite/jobs.ts is in store), or, for a file
 * at the top of src/ (main.ts, config.ts), the file itself.
 */
export const folderOf = (path: string): string | undefined => /^src\/([^/]+)/.exec(path)?.[1];

// An import of something that is not code (console/index.html, which Bun bundles for the browser as a program of its
// own) ties no module to another: the page's scripts are not in the importing module's graph.
const isCode = (path: string) => /\.(ts|tsx|js|mjs|cjs)$/.test(path);

/** The folders of src/ and what each imports of the others, with the imports (file -> file) that make each edge. */
export function folderGraph(result: ICruiseResult): Map<string, Map<string, string[]>> {
  const graph = new Map<string, Map<string, string[]>>();
  for (const module of result.modules) {
    const from = folderOf(module.source);
    if (from === undefined) continue;
    if (!graph.has(from)) graph.set(from, new Map());
    for (const dependency of module.dependencies) {
      const to = folderOf(dependency.resolved);
      if (to === undefined || to === from || !isCode(dependency.resolved)) continue;
      const edges = graph.get(from)!;
      const imports = edges.get(to) ?? [];
      const typeOnly = dependency.dependencyTypes.includes("type-only") ? " (types)" : "";
      imports.push(`${module.source} -> ${dependency.resolved}${typeOnly}`);
      edges.set(to, imports);
    }
  }
  return graph;
}

/** The cycles of the folder graph: its strongly connected components of more than one folder (Tarjan), sorted. */
export function folderCycles(graph: Map<string, Map<string, string[]>>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (folder: string) => {
    index.set(folder, next);
    low.set(folder, next++);
    stack.push(folder);
    onStack.add(folder);
    for (const to of graph.get(folder)?.keys() ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(folder, Math.min(low.get(folder)!, low.get(to)!));
      } else if (onStack.has(to)) {
        low.set(folder, Math.min(low.get(folder)!, index.get(to)!));
      }
    }
    if (low.get(folder) === index.get(folder)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== folder);
      if (component.length > 1) cycles.push(component.sort());
    }
  };
  for (const folder of [...graph.keys()].sort()) if (!index.has(folder)) visit(folder);
  return cycles.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** A cycle, told: each edge between its folders, with the imports that make it. */
function describeCycle(cycle: string[], graph: Map<string, Map<string, string[]>>): string {
  const members = new Set(cycle);
  const lines = [`cycle between the folders of src/: ${cycle.join(", ")}`];
  for (const from of cycle) {
    for (const [to, imports] of [...(graph.get(from) ?? [])].sort(([a], [b]) => a.localeCompare(b))) {
      if (!members.has(to)) continue;
      lines.push(`  ${from} -> ${to}:`, ...imports.map((line) => `    ${line}`));
    }
  }
  return lines.join("\n");
}

export type DependencyCheck = { ok: boolean; report: string; graph: Map<string, Map<string, string[]>> };

/** Cruises src/ with .dependency-cruiser.cjs (in dependency-cruiser's own process), and checks its rules and the folder graph. */
export function checkDependencies(): DependencyCheck {
  const cruise = Bun.spawnSync([join(root, "node_modules", ".bin", "depcruise"), "src", "--config", ".dependency-cruiser.cjs", "--output-type", "json"], {
    cwd: root,
    stdout: "pipe",
    stderr: "pipe",
  });
  let result: ICruiseResult;
  try {
    result = JSON.parse(cruise.stdout.toString()) as ICruiseResult;
  } catch {
    throw new Error(`dependency-cruiser did not answer (exit ${cruise.exitCode}):\n${cruise.stderr.toString()}${cruise.stdout.toString().slice(0, 2000)}`);
  }
  const problems: string[] = [];
  for (const violation of result.summary.violations) {
    const cycle = violation.cycle?.length ? `\n    via ${violation.cycle.map((step) => step.name).join(" -> ")}` : "";
    problems.push(`${violation.rule.name} (${violation.rule.severity}): ${violation.from} -> ${violation.to}${cycle}`);
  }
  const graph = folderGraph(result);
  for (const cycle of folderCycles(graph)) problems.push(describeCycle(cycle, graph));
  const rules = result.summary.ruleSetUsed?.forbidden?.length ?? 0;
  const cruised = `${result.summary.totalCruised} modules, ${result.summary.totalDependenciesCruised} dependencies, ${rules} rules, ${graph.size} folders`;
  const report =
    problems.length === 0
      ? `dependencies: no rule of .dependency-cruiser.cjs broken, no cycle between the folders of src/ (${cruised})`
      : `dependencies: ${problems.length} problem${problems.length === 1 ? "" : "s"} (${cruised})\n\n${problems.join("\n\n")}\n\n` +
        "A rule's reason is its comment in .dependency-cruiser.cjs; the layering, in docs/development.md (\"The layering\").";
  return { ok: problems.length === 0, report, graph };
}

if (import.meta.main) {
  const { ok, report, graph } = checkDependencies();
  if (process.argv.includes("--graph")) {
    for (const [from, edges] of [...graph].sort(([a], [b]) => a.localeCompare(b))) {
      console.log(`${from.padEnd(14)} -> ${[...edges.keys()].sort().join(", ") || "(nothing of src/)"}`);
    }
    console.log();
  }
  (ok ? console.log : console.error)(report);
  process.exit(ok ? 0 : 1);
}
