import { useEffect, useState } from "preact/hooks";
import { defaultChunkBytes } from "../../importer/chunked-import";
import { newRunId } from "../../importer/idempotency";
import type { Session } from "../session";
import { settingsOf, type Counts, type FromWorker, type ImportSettings, type RunLedger } from "./protocol";
import { forgetImport, isSameFile, keepImport, savedImport, withEntry, type SavedImport } from "./saved";
import { startImport } from "./start";

/**
 * The page's one import, apart from the screen that shows it: it goes on while the person looks at the jobs it
 * queued, and the import screen shows where it is when they come back. A reload ends it; session storage then says
 * what had been queued (saved.ts).
 */

export type ImportChoice = ImportSettings & { file: File };
export type Ended = Extract<FromWorker, { type: "done" }>;
export type Stage =
  | { name: "choosing" }
  | { name: "running"; dryRun: boolean; records?: number; counts?: Counts; ignored?: string[] }
  | { name: "checked"; result: Ended }
  | { name: "applied"; result: Ended; resumedFrom?: string }
  | { name: "failed"; message: string };

export type ImportState = {
  stage: Stage;
  /** What was last chosen to import, kept for the screen's form. */
  choice?: ImportChoice;
  /** An applying import that has not ended (interrupted by a reload, a lost server or Stop), if any. */
  interrupted?: SavedImport;
  /** Something to know that is not a failure: storage full. */
  warning?: string;
};

let state: ImportState = { stage: { name: "choosing" } };
const listeners = new Set<(now: ImportState) => void>();
let stopWorker: (() => void) | undefined;

function update(change: Partial<ImportState>): void {
  state = { ...state, ...change };
  for (const listener of listeners) listener(state);
}

export function useImport(session: Session): ImportState {
  const [now, setNow] = useState(state);
  useEffect(() => {
    listeners.add(setNow);
    // What changed between the first render and now (a worker's message) is not missed; and what a reload left is read.
    if (state.stage.name !== "running") update({ interrupted: savedImport(session.environment) });
    else setNow(state);
    return () => void listeners.delete(setNow);
  }, []);
  return now;
}

/** Records done so far (applied or rejected), and that as a whole percentage of the file's (until it is known, none). */
export function recordsDone(counts: Counts | undefined): { done: number; percent?: number } {
  const done = counts ? counts.applied + counts.rejected : 0;
  return { done, percent: counts && counts.total > 0 ? Math.floor((done / counts.total) * 100) : undefined };
}

const newRun = (): RunLedger => ({ runId: newRunId(), chunkBytes: defaultChunkBytes, entries: [] });

/**
 * The interrupted import that importing `file` into `resource` would resume: the same file into the same resource, a
 * mirror only as a mirror (a mirror's end deletes records: it is not resumed unless asked for again).
 */
export function resumes(file: File | undefined, resource: string | undefined, interrupted: SavedImport | undefined, mirror = false): SavedImport | undefined {
  return file && interrupted && isSameFile(interrupted, file) && interrupted.resource === resource && Boolean(interrupted.mirror) === mirror ? interrupted : undefined;
}

/** A new choice of file or settings: whatever was shown of the last one goes. */
export function choose(choice: ImportChoice | undefined): void {
  if (state.stage.name === "running") return;
  update({ choice, stage: { name: "choosing" }, warning: undefined });
}

/**
 * A dry run, or applying (resuming the interrupted import of the same file, if any). `maxDelete`: a mirror's limit,
 * the records its dry run considered, so that applying deletes no more than the person saw.
 */
export function beginImport(session: Session, choice: ImportChoice, dryRun: boolean, maxDelete?: number): void {
  if (state.stage.name === "running") return;
  update({ choice });
  const { file } = choice;
  const resuming = dryRun ? undefined : resumes(file, choice.resource, state.interrupted, choice.mirror);
  // Applying keeps its run in session storage from the start: a reload even before the first answer resumes it.
  let saved: SavedImport | undefined = dryRun
    ? undefined
    : (resuming ?? {
        ...settingsOf(choice),
        environment: session.environment,
        file: { name: file.name, size: file.size, lastModified: file.lastModified },
        startedAt: new Date().toISOString(),
        records: 0,
        run: { ...newRun(), ...(choice.mirror && maxDelete !== undefined ? { maxDelete } : {}) },
      });
  update({
    stage: { name: "running", dryRun },
    interrupted: saved,
    warning: saved && !keepImport(saved) ? "This browser's session storage is full: if the page is reloaded during the import, it cannot resume, and the whole file would be sent again." : undefined,
  });
  const running = (change: Partial<Extract<Stage, { name: "running" }>>) => state.stage.name === "running" && update({ stage: { ...state.stage, ...change } });
  const end = (stage: Stage, resumable: boolean) => {
    stopWorker = undefined;
    if (!saved) return update({ stage });
    if (!resumable) forgetImport();
    update({ stage, interrupted: resumable ? saved : undefined });
  };
  stopWorker = startImport(
    {
      // A resumed import goes on as it was started, whatever the screen shows now.
      ...settingsOf(saved ?? choice),
      file,
      dryRun,
      environment: session.environment,
      baseUrl: `${location.origin}/${encodeURIComponent(session.environment)}`,
      apiKey: session.apiKey,
      run: saved?.run ?? newRun(),
    },
    (message: FromWorker) => {
      if (message.type === "surveyed") {
        if (saved) keepImport((saved = { ...saved, records: message.records }));
        running({ records: message.records, ignored: message.ignored });
      } else if (message.type === "progress") running({ counts: message.counts });
      else if (message.type === "queued") {
        if (saved) keepImport((saved = withEntry(saved, message.chunkBytes, message.entry)));
      } else if (message.type === "sync") {
        // Kept before any chunk is sent in it: a reload resumes the mirror in the same sync.
        if (saved) keepImport((saved = { ...saved, run: { ...saved.run, sync: message.sync } }));
      } else if (message.type === "done") end(dryRun ? { name: "checked", result: message } : { name: "applied", result: message, resumedFrom: resuming?.startedAt }, false);
      // The worker says whether there is something to resume (saved.ts keeps it until then, or until forgotten).
      else end({ name: "failed", message: message.message }, message.resumable);
    },
  );
}

/** Stops the import now; what it queued is applied all the same, and an applying import can be resumed. */
export function haltImport(session: Session): void {
  stopWorker?.();
  stopWorker = undefined;
  update({ stage: { name: "choosing" }, interrupted: savedImport(session.environment) });
}

export function forgetInterrupted(): void {
  forgetImport();
  update({ interrupted: undefined });
}

/** Signing out ends the import: its worker holds the key. What it queued stays in session storage, to resume. */
export function endImports(): void {
  stopWorker?.();
  stopWorker = undefined;
  update({ stage: { name: "choosing" }, choice: undefined, interrupted: undefined, warning: undefined });
}
