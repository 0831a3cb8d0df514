import { watch, type FSWatcher } from "node:fs";
import { basename, dirname } from "node:path";

// Renewal tools write the certificate and the key one after the other, or swap symbolic links (certbot's live/):
// changes are gathered for this long, then read once.
const settleMs = 500;

/**
 * Calls `changed` when any of `files` is written, replaced or renamed into place: their directories are watched, so
 * that a file replaced by a new one (or a link pointed elsewhere) is seen too. Answers a function that stops.
 */
export function watchFiles(files: readonly string[], changed: () => void): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const watchers: FSWatcher[] = [];
  for (const dir of new Set(files.map((file) => dirname(file)))) {
    const names = new Set(files.filter((file) => dirname(file) === dir).map((file) => basename(file)));
    try {
      const watcher = watch(dir, (_, name) => {
        if (name !== null && !names.has(String(name))) return;
        clearTimeout(timer);
        timer = setTimeout(changed, settleMs);
      });
      // A directory removed under it: SIGHUP still reloads.
      watcher.on("error", () => watcher.close());
      watchers.push(watcher);
    } catch {
      // Not watchable (gone, no permission): SIGHUP still reloads.
    }
  }
  return () => {
    clearTimeout(timer);
    for (const watcher of watchers) watcher.close();
  };
}
