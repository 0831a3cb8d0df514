import { useEffect, useState } from "preact/hooks";
import { fieldPaths } from "../../importer/fields";
import type { Format } from "../../importer/source";
import { resourceByPath, resources } from "../../resources/registry";
import { saveFile } from "../downloads";
import { count } from "../format";
import { beginImport, choose, recordsDone, forgetInterrupted, haltImport, resumes, useImport, type Ended, type Stage } from "../import/controller";
import type { ShownRejection } from "../import/protocol";
import type { SavedImport } from "../import/saved";
import { jobHref } from "../route";
import type { Session } from "../session";
import { StatusBadge } from "./status";

const megabytes = (bytes: number) =>
  bytes < 1_000_000 ? `${Math.ceil(bytes / 1_000)} KB` : `${(bytes / 1_000_000).toLocaleString("en-US", { maximumFractionDigits: bytes < 10_000_000 ? 1 : 0 })} MB`;
const fieldsOf = (path: string) => {
  const resource = resourceByPath(path);
  if (!resource) return "";
  const { leaves, required } = fieldPaths(resource.schema);
  return leaves.map((field) => (required.includes(field) ? `${field}*` : field)).join(", ");
};
const plural = (n: number, word: string) => `${count(n)} ${word}${n === 1 ? "" : "s"}`;

/**
 * A file imported from the browser, as `importd import` does it (DECISIONS 11 and 12): chosen or dropped, checked and
 * sent in chunks by a Web Worker, first as a dry run whose verdict is shown, then applied with a progress bar; the
 * rejected records, in the file's own format, to download, fix and import again. A reload in the middle of applying
 * is said, and the same file chosen again sends only what had not been queued.
 */
export function ImportView({ session }: { session: Session }) {
  const { stage, choice, interrupted, warning } = useImport(session);
  const [resource, setResource] = useState(choice?.resource ?? interrupted?.resource ?? resources[resources.length - 1]!.path);
  const [file, setFile] = useState(choice?.file);
  const [format, setFormat] = useState<"" | Format>(choice?.format ?? "");
  const [delimiter, setDelimiter] = useState(choice?.delimiter ?? "");
  const [ignoreUnknownColumns, setIgnoreUnknownColumns] = useState(choice?.ignoreUnknownColumns ?? false);
  const [mirror, setMirror] = useState(choice?.mirror ?? false);
  const [dragging, setDragging] = useState(false);
  const chosen = file && { file, resource, format: format || undefined, delimiter: delimiter || undefined, ignoreUnknownColumns, mirror };
  // Each change of file or setting is a new choice: what was shown of the last one goes.
  useEffect(() => {
    if (chosen && (file !== choice?.file || resource !== choice.resource || chosen.format !== choice.format || chosen.delimiter !== choice.delimiter || ignoreUnknownColumns !== choice.ignoreUnknownColumns || mirror !== choice.mirror)) choose(chosen);
  }, [file, resource, format, delimiter, ignoreUnknownColumns, mirror]);

  const running = stage.name === "running";
  const resuming = resumes(file, resource, interrupted, mirror);
  return (
    <section aria-labelledby="import-title">
      <h1 id="import-title">Import a file</h1>
      {interrupted && !running && <InterruptedNote saved={interrupted} matches={resuming !== undefined} onForget={forgetInterrupted} />}
      {warning && <p class="note">{warning}</p>}
      <form
        class="import"
        onSubmit={(event) => {
          event.preventDefault();
          if (chosen) beginImport(session, chosen, resuming === undefined);
        }}
      >
        <div class="filters">
          <label>
            Resource
            <select value={resource} disabled={running} onChange={(event) => setResource(event.currentTarget.value)}>
              {resources.map((each) => <option key={each.path} value={each.path}>{each.path}</option>)}
            </select>
          </label>
          <label>
            Format
            <select value={format} disabled={running} onChange={(event) => setFormat(event.currentTarget.value as Format | "")}>
              <option value="">From the file's name</option>
              <option value="csv">CSV</option>
              <option value="ndjson">NDJSON</option>
              <option value="json">JSON array</option>
            </select>
          </label>
          <label>
            Delimiter (CSV)
            <select value={delimiter} disabled={running} onChange={(event) => setDelimiter(event.currentTarget.value)}>
              <option value="">Detect</option>
              <option value=",">, comma</option>
              <option value=";">; semicolon</option>
              <option value={"\t"}>tab</option>
            </select>
          </label>
          <label class="inline">
            <input type="checkbox" checked={ignoreUnknownColumns} disabled={running} onChange={(event) => setIgnoreUnknownColumns(event.currentTarget.checked)} />
            Ignore unknown columns
          </label>
          <label class="inline">
            <input type="checkbox" checked={mirror} disabled={running} onChange={(event) => setMirror(event.currentTarget.checked)} />
            Mirror: delete the records of {resource} that the file does not have
          </label>
        </div>
        <div
          class={`drop${dragging ? " dragging" : ""}`}
          onDragOver={(event) => {
            event.preventDefault();
            setDragging(true);
          }}
          onDragLeave={() => setDragging(false)}
          onDrop={(event) => {
            event.preventDefault();
            setDragging(false);
            const dropped = event.dataTransfer?.files[0];
            if (!running && dropped) setFile(dropped);
          }}
        >
          <label>
            File
            <input type="file" accept=".csv,.tsv,.ndjson,.jsonl,.json" disabled={running} onChange={(event) => setFile(event.currentTarget.files?.[0])} />
          </label>
          <p class="hint">
            Drop a CSV, NDJSON or JSON file here, or choose one: of any size, read a few megabytes at a time and sent in chunks. A CSV needs a header row naming the fields of {resource}{" "}
            ({fieldsOf(resource)}; * required), and is read as UTF-8.
          </p>
          {file && <p>{file.name}, {megabytes(file.size)}</p>}
        </div>
        {!running && (
          <div class="actions">
            <button type="submit" disabled={!file}>{resuming ? "Resume the import" : "Check with a dry run"}</button>
          </div>
        )}
      </form>
      {stage.name === "running" && <Running stage={stage} onStop={() => haltImport(session)} />}
      {stage.name === "failed" && <p class="problem" role="alert">{stage.message}</p>}
      {stage.name === "checked" && <Checked result={stage.result} resource={resource} onApply={() => chosen && beginImport(session, chosen, false, allowedBy(stage.result.mirror))} />}
      {stage.name === "applied" && <Applied result={stage.result} resumedFrom={stage.resumedFrom} />}
    </section>
  );
}

function InterruptedNote({ saved, matches, onForget }: { saved: SavedImport; matches: boolean; onForget: () => void }) {
  const jobs = saved.run.entries.flatMap(({ jobId }) => (jobId === null ? [] : [jobId]));
  return (
    <div class="note" role="status" aria-label="Interrupted import">
      <p>
        The {saved.mirror ? "mirror" : "import"} of <strong>{saved.file.name}</strong> ({megabytes(saved.file.size)}{saved.records > 0 ? `, ${plural(saved.records, "record")}` : ""}) into{" "}
        {saved.resource}, started {new Date(saved.startedAt).toLocaleTimeString("en-GB")}, was interrupted.{" "}
        {jobs.length === 0 ? (
          "None of its requests had been queued as a job."
        ) : (
          <>
            {plural(jobs.length, "request")} had been queued, as {jobs.length === 1 ? "job" : "jobs"}{" "}
            {jobs.map((id, at) => (
              <span key={id}>{at > 0 && ", "}<a href={jobHref(id)}>{id}</a></span>
            ))}
            : importd applies {jobs.length === 1 ? "it" : "them"} whatever happens to this page.
          </>
        )}
      </p>
      <p>
        {matches
          ? "This is its file: resume, and what was queued is not sent again."
          : `To send the rest, choose ${saved.file.name} again (the same file, unchanged) with ${saved.resource}${saved.mirror ? " and Mirror ticked" : ""}; what was queued is not sent again. Importing another file instead forgets it.`}{" "}
        <button type="button" class="quiet" onClick={onForget}>Forget it</button>
      </p>
    </div>
  );
}

function Running({ stage, onStop }: { stage: Extract<Stage, { name: "running" }>; onStop: () => void }) {
  const { counts, records } = stage;
  const { done } = recordsDone(counts);
  return (
    <div class="running" aria-live="polite">
      <h2>{stage.dryRun ? "Dry run" : "Applying"}</h2>
      {records === undefined ? (
        <>
          <progress aria-label="Checking the file" />
          <p>Reading the file to check it before anything is sent…</p>
        </>
      ) : (
        <>
          <progress aria-label={stage.dryRun ? "Dry run progress" : "Import progress"} max={Math.max(records, 1)} value={done} />
          <p>
            {count(done)} of {plural(records, "record")} done: {count(counts?.applied ?? 0)} {stage.dryRun ? "would be applied" : "applied"}, {count(counts?.rejected ?? 0)} rejected.{" "}
            {counts && <span class="quiet">Read {megabytes(counts.bytesRead)} of {megabytes(counts.fileBytes)}, sent {plural(counts.sent, "record")}.</span>}
          </p>
          {stage.ignored && stage.ignored.length > 0 && <p class="quiet">Not imported, as asked: {stage.ignored.join(", ")}.</p>}
        </>
      )}
      <button type="button" class="quiet" onClick={onStop}>Stop</button>
    </div>
  );
}

function Checked({ result, resource, onApply }: { result: Ended; resource: string; onApply: () => void }) {
  const { counts } = result;
  const mirror = result.mirror?.dryRun ? result.mirror : undefined;
  return (
    <div aria-label="Dry run verdict" role="region">
      <h2>Dry run: nothing was applied</h2>
      <p class="verdict">
        Of {plural(counts.read, "record")}, applying would create {count(counts.created)}, update {count(counts.updated)} and leave {count(counts.unchanged)} unchanged;{" "}
        {count(counts.rejected)} would be rejected.
        {result.jobs.length > 1 && ` Each of the ${result.jobs.length} requests was tried against the data as it is now, without the requests before it.`}
      </p>
      {result.ignored.length > 0 && <p class="quiet">Not imported, as asked: {result.ignored.join(", ")}.</p>}
      {mirror && <MirrorForecast mirror={mirror} resource={resource} />}
      <Rejections result={result} would />
      <div class="actions">
        <button type="button" onClick={onApply}>
          {mirror?.wouldDelete ? `Apply: import the file and delete ${plural(mirror.wouldDelete, "record")}` : "Apply: import the file"}
        </button>
      </div>
    </div>
  );
}

type Forecast = Extract<NonNullable<Ended["mirror"]>, { dryRun: true }>;

/**
 * What applying a mirror allows its completion to delete (maxDelete): the records its dry run considered, which the
 * person saw; none when it could not count them (importd's default limit then).
 */
const allowedBy = (mirror: Ended["mirror"]) => (mirror?.dryRun && mirror.wouldDelete !== undefined ? mirror.considered : undefined);

/** A mirror's dry run: what applying would delete, as importd's dry-run completion of the file's dry runs counted it. */
function MirrorForecast({ mirror, resource }: { mirror: Forecast; resource: string }) {
  const { wouldDelete, considered, rejected, job, message, overLimit } = mirror;
  const told = job && (
    <>
      importd's dry run of the mirror's end (job <a href={jobHref(job.id)}>{job.id}</a>): {message}
    </>
  );
  if (wouldDelete === undefined) {
    return (
      <div class="mirror" aria-label="Mirror forecast" role="region">
        <p class="problem">Mirror: {told ?? message}</p>
      </div>
    );
  }
  return (
    <div class="mirror" aria-label="Mirror forecast" role="region">
      <p class="verdict">
        Mirror: would delete {plural(wouldDelete, "record")} of {resource}, those importd has that the file does not
        {rejected > 0 ? `; ${count(rejected)} more ${rejected === 1 ? "is" : "are"} kept, as other records refer to ${rejected === 1 ? "it" : "them"}` : ""}.
      </p>
      <p class="quiet">{told}</p>
      {overLimit && (
        <p>
          importd's limit: {overLimit} Applying lets {considered === 1 ? "it" : "them"} through.
        </p>
      )}
      <p class="hint">
        Applying sends the file in a new sync, then completes it allowing the {plural(considered, "record")} considered here: if there are more to delete by then,
        nothing is deleted. A record another job writes meanwhile is kept.
      </p>
    </div>
  );
}

function MirrorOutcome({ mirror }: { mirror: Extract<NonNullable<Ended["mirror"]>, { dryRun: false }> }) {
  const failed = !mirror.job || mirror.job.importJobStatus === "Failed";
  return (
    <div class="mirror" aria-label="Mirror outcome" role="region">
      <p class={failed ? "problem" : "verdict"}>
        Mirror (sync {mirror.sync}
        {mirror.job && (
          <>
            , job <a href={jobHref(mirror.job.id)}>{mirror.job.id}</a> <StatusBadge status={mirror.job.importJobStatus} />
          </>
        )}
        ): {mirror.message}
      </p>
    </div>
  );
}

function Applied({ result, resumedFrom }: { result: Ended; resumedFrom?: string }) {
  const { counts } = result;
  const earlier = counts.jobsFromEarlier + counts.replayed;
  return (
    <div aria-label="Import result" role="region">
      <h2>Imported</h2>
      <p class="verdict">
        {plural(counts.read, "record")}: {count(counts.applied)} applied ({count(counts.created)} created, {count(counts.updated)} updated, {count(counts.unchanged)} unchanged),{" "}
        {count(counts.rejected)} rejected, in {plural(result.jobs.length, "job")}.
        {earlier > 0 && resumedFrom && ` ${plural(earlier, "job")} had been queued before the interruption and ${earlier === 1 ? "was" : "were"} not sent again.`}
      </p>
      <ul class="jobs-done" aria-label="Jobs">
        {result.jobs.map((job) => (
          <li key={job.id}>
            <a href={jobHref(job.id)}>Job {job.id}</a> <StatusBadge status={job.importJobStatus} />
          </li>
        ))}
      </ul>
      {result.mirror && !result.mirror.dryRun && <MirrorOutcome mirror={result.mirror} />}
      <Rejections result={result} />
    </div>
  );
}

function Rejections({ result, would = false }: { result: Ended; would?: boolean }) {
  const { counts, rejections, rejectedFile } = result;
  if (counts.rejected === 0) return null;
  return (
    <>
      <div class="heading">
        <h3>{would ? "Records that would be rejected" : "Rejected records"}</h3>
        {rejectedFile && (
          <button type="button" onClick={() => saveFile(rejectedFile.blob, rejectedFile.name)}>
            Download {would ? "the records that would be rejected" : "the rejected records"} ({rejectedFile.name})
          </button>
        )}
      </div>
      {!would && <p class="hint">Each with its reason (_error) and where it stood (_line, or _index in a JSON array): fix them in that file and import it here again.</p>}
      <div class="scroll">
        <table class="rejected">
          <thead>
            <tr>
              <th scope="col">Where</th>
              <th scope="col">Why</th>
              <th scope="col">Record, as in the file</th>
            </tr>
          </thead>
          <tbody>
            {rejections.map((rejection: ShownRejection) => (
              <tr key={rejection.where}>
                <td class="nowrap">{rejection.where}</td>
                <td>{rejection.reason}</td>
                <td><code>{rejection.record}</code></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {counts.rejected > rejections.length && <p class="hint">The first {count(rejections.length)} of {count(counts.rejected)}: all of them are in the file to download.</p>}
    </>
  );
}
