import { useEffect, useState } from "preact/hooks";
import type { ImportdClient, JobDocument } from "../../client";
import { JobOperation, jobStatuses } from "../../domain/job";
import { jobTypes } from "../../resources/registry";
import { count, time } from "../format";
import { PageButtons, useCursorPages } from "../pages";
import { problemText } from "../problems";
import { jobHref, jobsHref, type JobFilters } from "../route";
import type { Session } from "../session";
import { StatusBadge } from "./status";

const pageSize = 25;
// The first page is asked again this often while it is shown and the tab is visible: new jobs and their ends appear
// without a reload. Older pages do not change but for their statuses, and are asked again only on request.
const refreshMs = 2_000;

/**
 * The environment's jobs, newest first, filtered (the filters are the URL's, and other filters make a new view, back on
 * the first page), a page at a time; the first page kept up to date.
 */
export function JobsView({ client, session, filters }: { client: ImportdClient; session: Session; filters: JobFilters }) {
  const pages = useCursorPages();
  const { after } = pages;
  const [page, setPage] = useState<{ items: JobDocument[]; nextCursor: string | null }>();
  const [problem, setProblem] = useState<string>();
  const [updatedAt, setUpdatedAt] = useState<Date>();

  useEffect(() => {
    let stopped = false;
    const load = async () => {
      if (document.hidden) return;
      try {
        const loaded = await client.listJobs({
          status: filters.status || undefined,
          type: filters.type || undefined,
          operation: filters.operation || undefined,
          dryRun: filters.dryRun === "" ? undefined : filters.dryRun === "true",
          limit: pageSize,
          after,
        });
        if (stopped) return;
        setPage(loaded);
        setProblem(undefined);
        setUpdatedAt(new Date());
      } catch (error) {
        if (!stopped) setProblem(problemText(error, session.environment));
      }
    };
    void load();
    const timer = after === undefined ? setInterval(load, refreshMs) : undefined;
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, [client, filters.status, filters.type, filters.operation, filters.dryRun, after]);

  const filter = (name: keyof JobFilters) => (event: Event) => {
    location.hash = jobsHref({ ...filters, [name]: (event.currentTarget as HTMLSelectElement).value });
  };

  return (
    <section aria-labelledby="jobs-title">
      <div class="heading">
        <h1 id="jobs-title">Jobs</h1>
        <p class="quiet" aria-live="polite">{after === undefined && updatedAt ? `Live: updated ${updatedAt.toLocaleTimeString("en-GB")}` : ""}</p>
      </div>
      <form class="filters" onSubmit={(event) => event.preventDefault()}>
        <label>
          Status
          <select name="status" value={filters.status} onChange={filter("status")}>
            <option value="">Any</option>
            {jobStatuses.map((status) => <option value={status}>{status}</option>)}
          </select>
        </label>
        <label>
          Type
          <select name="type" value={filters.type} onChange={filter("type")}>
            <option value="">Any</option>
            {jobTypes.map((type) => <option value={type}>{type}</option>)}
          </select>
        </label>
        <label>
          Operation
          <select name="operation" value={filters.operation} onChange={filter("operation")}>
            <option value="">Any</option>
            <option value={JobOperation.Upsert}>Imports</option>
            <option value={JobOperation.Delete}>Deletes</option>
            <option value={JobOperation.SyncCompletion}>Mirror completions</option>
          </select>
        </label>
        <label>
          Dry runs
          <select name="dryRun" value={filters.dryRun} onChange={filter("dryRun")}>
            <option value="">Included</option>
            <option value="true">Only dry runs</option>
            <option value="false">Left out</option>
          </select>
        </label>
      </form>
      {problem && <p class="problem" role="alert">{problem}</p>}
      {page && page.items.length === 0 &&
        (filters.status || filters.type || filters.operation || filters.dryRun ? (
          <p>No jobs match these filters.</p>
        ) : (
          <p>
            No jobs yet: <a href="#/import">import a file</a> here, with <code>importd import</code>, or POST to the API.
          </p>
        ))}
      {page && page.items.length > 0 && (
        <div class="scroll">
          <table class="jobs">
            <thead>
              <tr>
                <th scope="col">Job</th>
                <th scope="col">Type</th>
                <th scope="col">Status</th>
                <th scope="col" class="number">Records</th>
                <th scope="col" class="number">Applied</th>
                <th scope="col" class="number">Rejected</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {page.items.map((job) => (
                <tr key={job.id}>
                  <td class="nowrap">
                    <a href={jobHref(job.id)}>{job.id}</a>
                    {job.dryRun && <span class="tag" title="A dry run: nothing was applied">dry run</span>}
                  </td>
                  <td class="nowrap">
                    {job.importJobType}
                    {job.operation === JobOperation.Delete && <span class="tag delete" title="A delete job: it deletes the records of the ids it was sent">delete</span>}
                    {job.operation === JobOperation.SyncCompletion && <span class="tag delete" title="A mirror's completion: it deletes the records its sync's imports did not send">mirror</span>}
                  </td>
                  <td><StatusBadge status={job.importJobStatus} /></td>
                  <td class="number">{count(job.recordCount)}</td>
                  {/* A dry run applied nothing: its figure is what applying would do. A delete job's applied are deleted and not found. */}
                  <td class="number nowrap">{appliedCell(job)}</td>
                  <td class="number">{count(job.output?.rejected)}</td>
                  <td>{time(job.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <PageButtons pages={pages} next={page?.nextCursor} label="Pages of jobs" names={{ first: "Newest", back: "Newer", on: "Older" }} />
    </section>
  );
}

/** The Applied column: a delete job's deleted (and not found, when some were), a dry run's in the conditional. */
function appliedCell(job: JobDocument): string {
  const output = job.output;
  if (!output) return count(undefined);
  if (job.operation !== JobOperation.Upsert) {
    const deleted = `${job.dryRun ? "would delete" : "deleted"} ${count(output.deleted)}`;
    return output.notFound ? `${deleted}, ${count(output.notFound)} not found` : deleted;
  }
  return job.dryRun ? `would apply ${count(output.applied)}` : count(output.applied);
}
