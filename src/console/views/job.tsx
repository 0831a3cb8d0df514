import { useEffect, useState } from "preact/hooks";
import { ImportdProblem, type ImportdClient, type JobDocument, type Page, type RejectedRecord } from "../../client";
import { JobOperation, operationMeanings, terminalStatuses } from "../../domain/job";
import { downloadRejectedCsv } from "../downloads";
import { count, duration, time } from "../format";
import { PageButtons, useCursorPages } from "../pages";
import { problemText } from "../problems";
import { shownReason } from "../reasons";
import type { Session } from "../session";
import { StatusBadge } from "./status";

const rejectedPageSize = 50;

/** One job: its timings, counts and message, kept up to date until it ends; its rejected records; cancel while pending. */
export function JobView({ client, session, id }: { client: ImportdClient; session: Session; id: number }) {
  const [job, setJob] = useState<JobDocument>();
  const [problem, setProblem] = useState<string>();
  const [busy, setBusy] = useState<string>();

  useEffect(() => {
    const stop = new AbortController();
    (async () => {
      try {
        const first = await client.getJob(id, { signal: stop.signal });
        setJob(first);
        // Long polls: each answer comes as soon as the job moves, or after a few seconds.
        if (!terminalStatuses.has(first.importJobStatus)) await client.waitForJob(id, { signal: stop.signal, onProgress: setJob });
      } catch (error) {
        if (!stop.signal.aborted) setProblem(problemText(error, session.environment));
      }
    })();
    return () => stop.abort();
  }, [client, id]);

  const cancel = async () => {
    setBusy("Canceling…");
    try {
      setJob(await client.cancelJob(id));
    } catch (error) {
      if (error instanceof ImportdProblem && error.status === 409) {
        setProblem("Too late to cancel: the job started meanwhile. It runs to its end; its outcome shows here.");
        setJob(await client.getJob(id).catch(() => job));
      } else setProblem(problemText(error, session.environment));
    } finally {
      setBusy(undefined);
    }
  };

  const download = async () => {
    setBusy("Preparing the CSV…");
    try {
      await downloadRejectedCsv(client, id);
    } catch (error) {
      setProblem(problemText(error, session.environment));
    } finally {
      setBusy(undefined);
    }
  };

  if (!job) {
    return (
      <section>
        <h1>Job {id}</h1>
        {problem ? <p class="problem" role="alert">{problem}</p> : <p>Loading…</p>}
      </section>
    );
  }
  const output = job.output;
  // A delete job's and a mirror's completion's counts and rejected rows are of ids; a completion has no "not found".
  const deleting = job.operation !== JobOperation.Upsert;
  const meaning = operationMeanings[job.operation as JobOperation] ?? job.operation;
  return (
    <section aria-labelledby="job-title">
      <p><a href="#/jobs">← Jobs</a></p>
      <div class="heading">
        <h1 id="job-title">
          Job {job.id} <StatusBadge status={job.importJobStatus} />
        </h1>
        {job.importJobStatus === "Pending" && (
          <button type="button" class="danger" disabled={busy !== undefined} onClick={cancel}>Cancel this job</button>
        )}
      </div>
      {job.dryRun && <p class="note">A dry run: nothing was applied. The counts say what applying would have done.</p>}
      {problem && <p class="problem" role="alert">{problem}</p>}
      {busy && <p aria-live="polite">{busy}</p>}
      <dl class="facts">
        <dt>Type</dt>
        <dd>{job.importJobType}</dd>
        <dt>Operation</dt>
        <dd>{`${job.operation}: ${meaning}`}</dd>
        <dt>{deleting ? "Ids" : "Records"}</dt>
        <dd>{count(job.recordCount)}</dd>
        <dt>Created</dt>
        <dd>{time(job.createdAt)}</dd>
        <dt>Started</dt>
        <dd>{time(job.startedAt)} {job.startedAt && <span class="quiet">(queued {duration(job.createdAt, job.startedAt)})</span>}</dd>
        <dt>Completed</dt>
        <dd>{time(job.completedAt)} {job.completedAt && <span class="quiet">(ran {duration(job.startedAt ?? job.createdAt, job.completedAt)})</span>}</dd>
      </dl>
      {output && (
        <>
          {/* A dry run's counts are what applying would do, and are named so; a delete job's are its own. */}
          {deleting ? (
            <dl class="counts" aria-label="Counts">
              <div><dt>{job.dryRun ? "Would delete" : "Deleted"}</dt><dd>{count(output.deleted)}</dd></div>
              {job.operation === JobOperation.Delete ? (
                <div><dt>Not found</dt><dd>{count(output.notFound)}</dd></div>
              ) : (
                <div><dt>Considered</dt><dd>{count(output.total)}</dd></div>
              )}
              <div><dt>{job.dryRun ? "Would reject" : "Rejected"}</dt><dd>{count(output.rejected)}</dd></div>
            </dl>
          ) : (
            <dl class="counts" aria-label="Counts">
              <div><dt>{job.dryRun ? "Would apply" : "Applied"}</dt><dd>{count(output.applied)}</dd></div>
              <div><dt>{job.dryRun ? "Would create" : "Created"}</dt><dd>{count(output.created)}</dd></div>
              <div><dt>{job.dryRun ? "Would update" : "Updated"}</dt><dd>{count(output.updated)}</dd></div>
              <div><dt>{job.dryRun ? "Would leave unchanged" : "Unchanged"}</dt><dd>{count(output.unchanged)}</dd></div>
              <div><dt>{job.dryRun ? "Would reject" : "Rejected"}</dt><dd>{count(output.rejected)}</dd></div>
            </dl>
          )}
          <h2>Message</h2>
          <p class="message">{output.message}</p>
        </>
      )}
      {output && output.rejected > 0 && (
        <>
          <div class="heading">
            <h2>{deleting ? "Rejected ids" : "Rejected records"}</h2>
            <button type="button" disabled={busy !== undefined} onClick={download}>Download the rejected {deleting ? "ids" : "records"} (CSV)</button>
          </div>
          <RejectedRecords client={client} session={session} id={job.id} />
        </>
      )}
    </section>
  );
}

function RejectedRecords({ client, session, id }: { client: ImportdClient; session: Session; id: number }) {
  const pages = useCursorPages();
  const { after } = pages;
  const [page, setPage] = useState<Page<RejectedRecord>>();
  const [problem, setProblem] = useState<string>();

  useEffect(() => {
    let stopped = false;
    client.listRejected(id, { limit: rejectedPageSize, after }).then(
      (loaded) => !stopped && setPage(loaded),
      (error) => !stopped && setProblem(problemText(error, session.environment)),
    );
    return () => void (stopped = true);
  }, [client, id, after]);

  if (problem) return <p class="problem" role="alert">{problem}</p>;
  if (!page) return <p>Loading…</p>;
  return (
    <>
      <div class="scroll">
        <table class="rejected">
          <thead>
            <tr>
              <th scope="col" class="number">Index</th>
              <th scope="col">Id</th>
              <th scope="col">Field</th>
              <th scope="col">Why</th>
              <th scope="col">Record, as sent</th>
            </tr>
          </thead>
          <tbody>
            {page.items.map((rejected) => (
              <tr key={rejected.index}>
                <td class="number">{rejected.index}</td>
                <td class="nowrap">{rejected.id ?? "–"}</td>
                <td>{rejected.field}</td>
                <td>{shownReason(rejected.message)}</td>
                <td><code>{spaced(rejected.record)}</code></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <PageButtons pages={pages} next={page.nextCursor} label="Pages of rejected records" names={{ back: "Previous", on: "Next" }} />
    </>
  );
}

/** The record's JSON on one line with a space after each comma and colon: a narrow column wraps it between fields and words, not inside them. */
const spaced = (record: unknown) => JSON.stringify(record, null, 1).replace(/\n\s*/g, " ");
