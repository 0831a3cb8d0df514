import { useEffect, useState } from "preact/hooks";
import { ImportdProblem, type ImportdClient, type Page, type Resource } from "../../client";
import { resourceByPath, resources } from "../../resources/registry";
import { downloadExport } from "../downloads";
import { time } from "../format";
import { PageButtons, useCursorPages } from "../pages";
import { problemText } from "../problems";
import { jobHref } from "../route";
import type { Session } from "../session";

const pageSize = 25;
type StoredRecord = { id: string; name?: string; updatedAt: string; lastJobId: number } & Record<string, unknown>;

/** A resource's records: one looked up by id, or all of them a page at a time, in id order. */
export function RecordsView({ client, session, resource: chosen }: { client: ImportdClient; session: Session; resource?: string }) {
  const resource = resourceByPath(chosen ?? "") ?? resources[resources.length - 1]!;
  const [lookup, setLookup] = useState("");
  const [found, setFound] = useState<{ id: string; record?: StoredRecord; problem?: string }>();
  const pages = useCursorPages();
  const { after, setCursors } = pages;
  const [page, setPage] = useState<Page<StoredRecord>>();
  const [problem, setProblem] = useState<string>();
  const [exporting, setExporting] = useState<string>();

  useEffect(() => {
    setCursors([undefined]);
    setFound(undefined);
  }, [resource.path]);

  useEffect(() => {
    let stopped = false;
    client.listRecords(resource.path as Resource, { limit: pageSize, after }).then(
      (loaded) => {
        if (stopped) return;
        setPage(loaded as Page<StoredRecord>);
        setProblem(undefined);
      },
      (error) => !stopped && setProblem(problemText(error, session.environment)),
    );
    return () => void (stopped = true);
  }, [client, resource.path, after]);

  const find = async (event: Event) => {
    event.preventDefault();
    const id = lookup.trim();
    if (!id) return;
    try {
      setFound({ id, record: (await client.getRecord(resource.path as Resource, id)) as StoredRecord });
    } catch (error) {
      const missing = error instanceof ImportdProblem && error.status === 404;
      setFound({ id, problem: missing ? `No ${resource.noun} has the id '${id}' in the environment '${session.environment}'.` : problemText(error, session.environment) });
    }
  };

  const download = async (format: "csv" | "ndjson") => {
    setExporting(`Exporting every ${resource.noun}…`);
    try {
      await downloadExport(client, resource.path, format);
      setExporting(undefined);
    } catch (error) {
      setExporting(undefined);
      setProblem(problemText(error, session.environment));
    }
  };

  return (
    <section aria-labelledby="records-title">
      <h1 id="records-title">Records</h1>
      <form class="filters" onSubmit={find}>
        <label>
          Resource
          <select name="resource" value={resource.path} onChange={(event) => (location.hash = `#/records/${event.currentTarget.value}`)}>
            {resources.map((each) => <option value={each.path}>{each.path}</option>)}
          </select>
        </label>
        <label>
          Id
          <input name="id" value={lookup} placeholder={`the id of a ${resource.noun}`} onInput={(event) => setLookup(event.currentTarget.value)} />
        </label>
        <button type="submit">Find</button>
      </form>
      {found?.problem && <p class="problem" role="alert">{found.problem}</p>}
      {found?.record && (
        <article class="record" aria-label={`${resource.noun} ${found.id}`}>
          <h2>{found.record.id}</h2>
          <p class="quiet">
            Last written by <a href={jobHref(found.record.lastJobId)}>job {found.record.lastJobId}</a> at {time(found.record.updatedAt)}
          </p>
          <pre>{JSON.stringify(found.record, null, 2)}</pre>
        </article>
      )}
      <h2>All {resource.path}</h2>
      <div class="actions">
        <button type="button" disabled={exporting !== undefined} onClick={() => download("csv")}>Download all {resource.path} (CSV)</button>
        <button type="button" disabled={exporting !== undefined} onClick={() => download("ndjson")}>Download all {resource.path} (NDJSON)</button>
        {exporting && <span class="quiet" role="status">{exporting}</span>}
      </div>
      <p class="quiet">One snapshot of every record, in id order; the CSV imports back unchanged with importd import.</p>
      {problem && <p class="problem" role="alert">{problem}</p>}
      {page && page.items.length === 0 && <p>No {resource.path} in this environment yet.</p>}
      {page && page.items.length > 0 && (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Id</th>
                <th scope="col">Name</th>
                <th scope="col">Updated</th>
                <th scope="col">By job</th>
              </tr>
            </thead>
            <tbody>
              {page.items.map((record) => (
                <tr key={record.id}>
                  <td class="nowrap">{record.id}</td>
                  <td>{record.name ?? ""}</td>
                  <td>{time(record.updatedAt)}</td>
                  <td><a href={jobHref(record.lastJobId)}>{record.lastJobId}</a></td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <PageButtons pages={pages} next={page?.nextCursor} label={`Pages of ${resource.path}`} names={{ back: "Previous", on: "Next" }} />
    </section>
  );
}
