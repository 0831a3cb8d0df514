/**
 * What `importd import` shows while it runs: one line redrawn in place on a terminal, or a plain line per
 * job otherwise. Progress is counted in records that are done (applied or rejected), not bytes read: the
 * file is read well ahead of the jobs that apply it.
 */

export type Progress = {
  read: number;
  sent: number;
  applied: number;
  rejected: number;
  /** Rejected here, before sending (unreadable rows); part of `rejected`. */
  rejectedBeforeSending: number;
  /** Records in the file: exact once it has been read to the end, until then estimated from the bytes read. */
  total: number;
  totalKnown: boolean;
  elapsedMs: number;
  job?: { id: number; importJobStatus: string };
  /** A delete's (importd delete): its records are ids, and what was applied is told as deleted and not found. */
  deletes?: { deleted: number; notFound: number };
  /** Sent as dry runs: the counts are what applying would do, and are said so. */
  dryRun?: boolean;
};

const count = (n: number) => Math.round(n).toLocaleString("en-US");

export function duration(seconds: number): string {
  if (seconds < 90) return `${Math.max(1, Math.ceil(seconds))} s`;
  if (seconds < 90 * 60) return `${Math.round(seconds / 60)} min`;
  const minutes = Math.round(seconds / 60);
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

const done = (p: Progress) => p.applied + p.rejected;

/** What was applied (deleted and not found, for a delete) and rejected, in a dry run's words when it is one. */
function outcomes(p: Progress, n: (value: number) => string): { applied: string[]; rejected: string } {
  if (p.dryRun) {
    const applied = p.deletes ? [`would delete ${n(p.deletes.deleted)}`, `would not find ${n(p.deletes.notFound)}`] : [`would apply ${n(p.applied)}`];
    return { applied, rejected: `would reject ${n(p.rejected)}` };
  }
  const applied = p.deletes ? [`${n(p.deletes.deleted)} deleted`, `${n(p.deletes.notFound)} not found`] : [`${n(p.applied)} applied`];
  return { applied, rejected: `${n(p.rejected)} rejected` };
}

/** The share of the records done; never 100% before the end, since the total may still be an estimate. */
function fraction(p: Progress): number {
  if (p.total <= 0) return 0;
  const share = done(p) / p.total;
  return p.totalKnown && done(p) >= p.total ? 1 : Math.min(share, 0.99);
}

/**
 * Seconds left at the rate records have been done so far; undefined until there is a rate to go by: 3 s and
 * 1% of the records in (the first seconds are the server's start on the first job, not its pace).
 */
function secondsLeft(p: Progress): number | undefined {
  if (p.elapsedMs < 3_000 || done(p) < p.total / 100 || done(p) === 0) return undefined;
  const left = Math.max(0, p.total - done(p));
  return left === 0 ? undefined : (left * p.elapsedMs) / 1000 / done(p);
}

/**
 * The terminal's progress line, shorter than `columns` so that it never wraps: `\r` and clear-line
 * only redraw the screen line the cursor is on, and a wrapped line would leave its head behind.
 * Parts are dropped, least useful first, until the line fits; the bar takes what room is left.
 */
export function progressLine(p: Progress, columns: number): string {
  const width = Math.max(10, columns - 1);
  const percent = `${Math.floor(fraction(p) * 100)}%`.padStart(4);
  const left = secondsLeft(p);
  const { applied, rejected } = outcomes(p, count);
  const parts = [
    { text: applied[0]!, drop: 5 },
    { text: rejected, drop: p.rejected === 0 ? 2 : 4 },
    { text: `of ${p.totalKnown ? "" : "~"}${count(p.total)}`, drop: 1 },
    { text: `${count(done(p) / Math.max(p.elapsedMs / 1000, 0.001))}/s`, drop: 0 },
    ...(left === undefined ? [] : [{ text: `${duration(left)} left`, drop: 3 }]),
  ];
  const render = (kept: typeof parts) => [percent, ...kept.map((part) => part.text)].join("  ");
  const fit = (room: number, upToRank: number) => {
    let kept = parts;
    for (let rank = 0; render(kept).length > room && rank <= upToRank; rank++) kept = kept.filter((part) => part.drop !== rank);
    return render(kept);
  };
  // A bar of 10 to 30 cells when the line still fits without the rate; otherwise no bar, and parts go.
  const withBar = fit(width - 13, 0);
  if (withBar.length > width - 13) return fit(width, 5).slice(0, width);
  const cells = Math.min(30, width - withBar.length - 3);
  const filled = Math.round(fraction(p) * cells);
  return `[${"#".repeat(filled)}${".".repeat(cells - filled)}] ${withBar}`;
}

/** One line per finished job when stderr is not a terminal (a log, a CI run): every count, no width limit. */
export function progressEntry(p: Progress): string {
  const seconds = Math.max(p.elapsedMs / 1000, 0.001);
  const thing = p.deletes ? "id" : "record";
  const { applied, rejected } = outcomes(p, String);
  return (
    `${p.read} ${thing}${p.read === 1 ? "" : "s"} read, ${p.sent} ${thing}${p.sent === 1 ? "" : "s"} sent, ${[...applied, rejected].join(", ")}` +
    (p.rejectedBeforeSending > 0 ? ` (${p.rejectedBeforeSending} before sending)` : "") +
    `; ${Math.round(done(p) / seconds)} ${thing}s/s` +
    (p.job ? ` (job ${p.job.id}: ${p.job.importJobStatus})` : "")
  );
}
