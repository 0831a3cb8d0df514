// The layering of src/, as rules dependency-cruiser checks (docs/development.md, "The layering"): `npm run
// lint:deps`, in CI and in `npm test` through tests/architecture/dependencies.test.ts. That command also fails on a
// cycle between folders of src/ (store/* -> jobs/* -> store/*), which it works out from this cruise
// (tests/architecture/dependencies.ts): a rule here sees files, not folders.
//
// Type-only imports count (tsPreCompilationDeps): a type that goes up the layers ties them as much as a value does.
//
// Read a rule as "`from` may not import `to`". A folder of src/ is itself plus its subfolders; the top-level files
// (main.ts, server.ts, config.ts, log.ts) are each a layer of their own.

/** `src/<folder>/` or `src/<file>.ts`, as a path pattern. */
const layer = (name) => (name.endsWith(".ts") ? `src/${name.replace(/\./g, "\\.")}$` : `src/${name}/`);
const anyOf = (names) => `^(${names.map(layer).join("|")})`;
const shown = (name) => (name.endsWith(".ts") ? `src/${name}` : `src/${name}/`);

/**
 * What a lower layer may import of src/ besides itself, and nothing else. The top (http/, cli/, client/, console/,
 * server.ts, main.ts) has the rules further down.
 */
const mayImportOnly = {
  // The bottom: what everyone says about a job and a delivery (see domain/job.ts).
  domain: [],
  // Addresses, CIDR ranges and the lists of them that the configuration gives (config.ts reads them here).
  net: [],
  // One definition per import resource, and the registry.
  resources: ["domain"],
  "config.ts": ["net"],
  "log.ts": ["config.ts"],
  // The ports and the backends, in the domain's own types: nothing above them (not the job rules, not webhooks/).
  store: ["domain", "resources"],
  access: ["domain", "net", "store"],
  // The job rules (intake, apply, outcome): over the store, under whoever runs them (worker/, http/).
  jobs: ["domain", "log.ts", "resources", "store"],
  tls: ["config.ts", "log.ts", "store"],
  webhooks: ["domain", "jobs", "log.ts", "net", "store"],
  worker: ["domain", "jobs", "log.ts", "resources", "store", "webhooks"],
  observability: ["domain", "jobs", "log.ts", "store", "worker"],
  // The importer runs in the CLI and, bundled, in the browser: it talks to importd through the client only.
  importer: ["client", "domain", "resources"],
};

const layering = Object.entries(mayImportOnly).map(([name, allowed]) => ({
  name: `layer-${name.replace(/\.ts$/, "")}`,
  comment: `${shown(name)} imports of src/ only ${allowed.length === 0 ? "itself: it is at the bottom" : `itself and ${allowed.map(shown).join(", ")}`} (.dependency-cruiser.cjs, mayImportOnly)`,
  severity: "error",
  from: { path: `^${layer(name)}` },
  to: { path: "^src/", pathNot: anyOf([name, ...allowed]) },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "A cycle between files. (Cycles between folders: tests/architecture/dependencies.ts.)",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true },
    },
    {
      name: "not-to-unresolvable",
      comment: "An import that does not resolve: a typo, or a package missing from package.json.",
      severity: "error",
      from: { path: "^src/" },
      to: { couldNotResolve: true },
    },
    ...layering,
    {
      name: "client-carries-none-of-the-server",
      comment:
        "The client (src/client/, for programs, the CLI and the browser console) takes its types from the server's schemas, and nothing else: " +
        "it imports the rest of src/ as types only (import type).",
      severity: "error",
      from: { path: "^src/client/" },
      to: { path: "^src/", pathNot: "^src/client/", dependencyTypesNot: ["type-only"] },
    },
    {
      name: "console-is-browser-code",
      comment:
        "The console (src/console/) is bundled for the browser and calls only the public API: it imports the client, the importer, the resource " +
        "definitions, domain/ and the job figures, and no Node or Bun module.",
      severity: "error",
      from: { path: "^src/console/" },
      to: { path: "^src/", pathNot: "^(src/(console|client|importer|resources|domain)/|src/jobs/figures\\.ts$)" },
    },
    {
      name: "console-uses-no-node-module",
      comment: "The console (src/console/) runs in the browser: no node: or bun module.",
      severity: "error",
      from: { path: "^src/console/" },
      to: { dependencyTypes: ["core"] },
    },
    {
      name: "console-is-served-as-its-page",
      comment:
        "Outside src/console/, only its page (console/index.html, which Bun bundles for the browser with its scripts) is imported: " +
        "the console's code is not the server's.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/console/" },
      to: { path: "^src/console/", pathNot: "^src/console/index\\.html$" },
    },
    {
      name: "only-main-and-cli-import-cli",
      comment: "src/cli/ is the command line's: main.ts calls it; nothing else in src/ (http/ included) imports it.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/(main\\.ts$|cli/)" },
      to: { path: "^src/cli/" },
    },
    {
      name: "only-main-starts-the-server",
      comment: "server.ts wires the server together; main.ts alone starts it.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/main\\.ts$" },
      to: { path: "^src/server\\.ts$" },
    },
    {
      name: "nothing-imports-main",
      comment: "main.ts is the entry point (argv to a command, the only process.exit).",
      severity: "error",
      from: { path: "^src/" },
      to: { path: "^src/main\\.ts$" },
    },
  ],
  options: {
    tsConfig: { fileName: "tsconfig.json" },
    // `import type` counts: see the top of this file.
    tsPreCompilationDeps: true,
    doNotFollow: { path: "node_modules" },
    // As TypeScript and Bun resolve: package exports (csv-stringify/browser/esm/sync), the .tsx of the console.
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
      extensions: [".ts", ".tsx", ".d.ts", ".js", ".mjs", ".cjs", ".json"],
    },
  },
};
