import { ImportdProblem, type ImportdClient, type JobDocument, type Resource, type Sync } from "../client";
import type { ResourceDefinition } from "../resources/definition";
import type { ImportTotals } from "./chunked-import";
import type { Journal } from "./journal";
import { SourceError } from "./text";

// `importd import --mirror` (DECISIONS 13): the file's chunks are sent in a sync, which is then completed, so that the
// records of the resource the file does not have are deleted. The server decides what goes and guards it; this file
// opens or rejoins the sync, queues the completion and says what came of it. The console's mirror completes with the
// same functions.

/** How much the completion may delete (--max-delete-percent, --max-delete); the server's default when neither. */
export type MirrorLimits = { maxDeletePercent?: number; maxDelete?: number };

const count = (value: number) => value.toLocaleString("en-US");

/** The flags that raise the limit, for a message of the server that names its query parameters. */
const flagsFor = (unsent: number, total: number) => `--max-delete-percent ${Math.ceil((unsent * 100) / total)} (or --max-delete ${unsent})`;

/**
 * The sync the mirror sends its chunks in: the interrupted run's, noted in the journal, if it is still open; else a
 * new one, noted before any chunk is sent. A sync that ended meanwhile (expired, completed) cannot be joined: said,
 * with what to do, and the journal is removed so that the same command starts again.
 */
export async function joinOrOpenSync(client: ImportdClient, resource: ResourceDefinition, journal: Journal, resumedChunks: number, note: (line: string) => void): Promise<Sync> {
  const earlier = journal.sync;
  if (earlier === undefined) {
    if (resumedChunks > 0) {
      journal.finish();
      throw new SourceError("The interrupted mirror of this file noted no sync in its progress file, so what it sent belongs to none: run the same command again, which opens a new sync and sends everything.");
    }
    const sync = await client.openSync(resource.path as Resource);
    journal.setSync(sync.id);
    return sync;
  }
  let sync: Sync | undefined;
  try {
    sync = await client.getSync(earlier);
  } catch (error) {
    if (!(error instanceof ImportdProblem) || error.status !== 404) throw error;
  }
  if (sync?.state === "open") {
    note(`The interrupted mirror's sync ${sync.id} (opened ${sync.createdAt}, open until ${sync.expiresAt}) is joined again: the records it sent stay sent.`);
    return sync;
  }
  journal.finish();
  const ended = !sync
    ? `no longer exists (ended and purged)`
    : sync.state === "expired"
      ? `expired at ${sync.expiresAt} (a sync must be completed within 24 hours of opening), and nothing was deleted`
      : `was completed meanwhile, by job ${sync.completedByJobId} at ${sync.completedAt}${sync.lastCompletion ? `: ${sync.lastCompletion.output?.message ?? ""}` : ""}`;
  throw new SourceError(
    `The interrupted mirror of this file cannot be resumed: its sync ${earlier} ${ended}. Its progress file is removed: ` +
      (sync?.state === "completed"
        ? "that mirror is done; running the same command again mirrors the file anew, in a new sync."
        : "run the same command again, which opens a new sync and sends the whole file in it."),
  );
}

/** The completion the interrupted run queued, if it has not ended: waited for rather than queued twice. */
const pendingCompletion = (sync: Sync) =>
  sync.jobs.find((job) => job.operation === "syncCompletion" && !job.dryRun && (job.importJobStatus === "Pending" || job.importJobStatus === "Processing"));

/**
 * Queues the sync's completion within `limits` (a dry run, if asked) and waits for it to end; the job is handed to
 * `onQueued` first. A real completion an interrupted run queued and that has not ended is waited for instead of
 * queued twice. `importd import --mirror` and the console's mirror both complete so.
 */
export async function runCompletion(client: ImportdClient, syncId: number, limits: MirrorLimits & { dryRun?: boolean }, onQueued?: (job: JobDocument) => void): Promise<JobDocument> {
  const queued = limits.dryRun ? undefined : pendingCompletion(await client.getSync(syncId));
  const job = queued ? await client.getJob(queued.id) : await client.completeSync(syncId, limits);
  onQueued?.(job);
  return client.waitForJob(job.id);
}

/**
 * What a completion stopped by the limit (maxDeletePercent, maxDelete) would have deleted: the records of the
 * resource its sync did not send (`unsent`, before the reference rule keeps some), of the resource's (`total`), as
 * the server's message says them. Undefined for any other end.
 */
export function stoppedByLimit(job: JobDocument): { unsent: number; total: number } | undefined {
  if (job.importJobStatus !== "Failed" || !job.output) return undefined;
  const over = /would delete ([\d,]+) of ([\d,]+) .*, more than the .* allowed/.exec(job.output.message);
  return over ? { unsent: Number(over[1]!.replaceAll(",", "")), total: Number(over[2]!.replaceAll(",", "")) } : undefined;
}

/**
 * The file's records that no job took (unreadable, or refused with their request): the sync does not know the file has
 * them, so its completion would delete them. A mirror with any is not completed.
 */
export const unknownToSync = (totals: Pick<ImportTotals, "rejectedBeforeSending" | "refusedByRequest">) => totals.rejectedBeforeSending + totals.refusedByRequest;

/**
 * Completes the mirror's sync once its chunks are in, and waits for the completion; answers the exit code's share:
 * 0 deleted what it considered, 1 a guard stopped it (nothing deleted), or some records were rejected (still
 * referred to). `dryRun`: the chunks were sent as dry runs, and so is the completion: the server counts what they sent
 * as sent, and says exactly what the mirror would delete, with nothing applied (the sync, used for nothing else,
 * expires).
 */
export async function completeMirror(
  client: ImportdClient,
  sync: Sync,
  limits: MirrorLimits & { dryRun?: boolean },
  out: (line: string) => void,
  progress: (text: string) => void,
): Promise<{ code: number; job: JobDocument }> {
  const done = await runCompletion(client, sync.id, limits, (job) => progress(`completing sync ${sync.id}: job ${job.id} ${limits.dryRun ? "counts" : "deletes"} the records the file does not have…`));
  const output = done.output!;
  const what = limits.dryRun ? "Mirror, dry run" : "Mirror";
  if (done.importJobStatus === "Failed") {
    out(`${what} stopped (sync ${sync.id}, job ${done.id}): ${output.message}`);
    // The server's message names its query parameters; the command's flags do the same.
    const over = stoppedByLimit(done);
    if (over) {
      out(
        limits.dryRun
          ? `If that is right, run the same command without --dry-run and with ${flagsFor(over.unsent, over.total)}.`
          : `If that is right, run the same command with ${flagsFor(over.unsent, over.total)}: the file is not sent again, the sync stays open until ${sync.expiresAt}.`,
      );
    }
    return { code: 1, job: done };
  }
  // The server's last words are for its API; a dry run's next step here is the same command without --dry-run.
  const message = limits.dryRun ? output.message.replace(/ The sync stays open: complete it without dryRun to delete them\.$/, " The same command without --dry-run would delete them.") : output.message;
  out(`${what} (sync ${sync.id}, job ${done.id}): ${message}`);
  return { code: (output.rejected ?? 0) > 0 ? 1 : 0, job: done };
}
