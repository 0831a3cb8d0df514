import { render } from "preact";
import { App } from "./app";
import { serveImports } from "./import/worker";

// One script, two roles: the page, and the Web Worker that the page starts on this same script to import a file
// (import/start.ts). A worker has no document.
if (typeof document === "undefined") serveImports();
else render(<App />, document.getElementById("console")!);
