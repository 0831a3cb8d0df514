import type { FromWorker, ImportOrder } from "./protocol";

/**
 * Starts an import in a Web Worker running this same script (see main.tsx): Bun bundles the console into one file at
 * build time, and a worker started from its own URL needs no second bundle. Answers a function that stops it.
 */
export function startImport(order: ImportOrder, onMessage: (message: FromWorker) => void): () => void {
  const worker = new Worker(import.meta.url, { type: "module" });
  worker.addEventListener("message", (event: MessageEvent<FromWorker>) => {
    onMessage(event.data);
    if (event.data.type === "done" || event.data.type === "failed") worker.terminate();
  });
  worker.addEventListener("error", (event) => {
    event.preventDefault();
    onMessage({ type: "failed", message: `The import stopped in the browser: ${event.message || "its worker failed"}.`, resumable: true });
    worker.terminate();
  });
  worker.postMessage(order);
  return () => worker.terminate();
}
