import type { Db } from "../db/client";
import { resourceByJobType, resourceByPath } from "../resources/registry";
import { RecordStore } from "../resources/store";
import { displayName } from "../resources/validate";
import { readBatch, type Records } from "./batch";
import { batchFailure, duplicateIdsOutcome, recordOutcome, type Rejection } from "./outcome";
import { JobRepository, type RejectedRecord } from "./repository";
import type { JobStatus } from "./states";

function findDuplicateIds(records: Records): Map<string, number[]> {
  const firstIndex = new Map<string, number>();
  const duplicates = new Map<string, number[]>();
  for (let index = 0; index < records.length; index++) {
    const id = records[index]!.id;
    const first = firstIndex.get(id);
    if (first === undefined) firstIndex.set(id, index);
    else {
      const indexes = duplicates.get(id);
      if (indexes) indexes.push(index);
      else duplicates.set(id, [first, index]);
    }
  }
  return duplicates;
}

/**
 * The rows of the rejected records: those with a reason of their own, or, when nothing was applied
 * (`batchMessage`), every record, those without a reason of their own carrying the batch's.
 */
function rejectedRecords(records: Records, rejections: Rejection[], batchMessage?: string): RejectedRecord[] {
  const byIndex = new Map(rejections.map((rejection) => [rejection.index, rejection]));
  const indexes = batchMessage === undefined ? [...byIndex.keys()].sort((a, b) => a - b) : records.map((_, index) => index);
  return indexes.map((index) => {
    const own = byIndex.get(index);
    return { position: index, field: own?.field ?? "$", message: own?.message ?? batchMessage!, record: JSON.stringify(records[index]) };
  });
}

/** What a job ended as: for the log and the metrics. */
export type FinishedJob = { type: string; status: JobStatus; total: number; applied: number; rejected: number };

/**
 * Applies one job in one transaction: claim it, re-read its payload (unless `parsed` is the batch this
 * thread accepted and validated itself), reject records whose references do not exist in the environment,
 * upsert the rest, store the outcome, drop the payload.
 * Returns what the job ended as, or undefined when the job was not there to claim.
 */
export function applyJob(db: Db, jobId: number, parsed?: Records): FinishedJob | undefined {
  const jobsRepo = new JobRepository(db);
  const job = jobsRepo.claim(jobId);
  if (!job) return undefined;
  const resource = resourceByJobType(job.type);
  const body = parsed ? undefined : jobsRepo.payload(jobId);

  return db.transaction(
    (tx) => {
      const finish = ({ status, output }: ReturnType<typeof recordOutcome>, records?: Records, rejections: Rejection[] = []): FinishedJob => {
        jobsRepo.finish(tx as never, jobId, status, output, records ? rejectedRecords(records, rejections, output.applied === 0 ? output.message : undefined) : []);
        return { type: job.type, status, total: output.total, applied: output.applied, rejected: output.rejected };
      };
      if (!parsed && !body) {
        return finish(batchFailure(job.recordCount, "The job's payload was lost, so nothing was applied. Re-send the batch."));
      }
      const batch = parsed ? ({ ok: true, records: parsed } as const) : readBatch(resource, body!);
      if (!batch.ok) {
        // Cannot happen for a payload that passed request-time validation, unless the rules changed in an upgrade.
        return finish(batchFailure(job.recordCount, `Nothing was applied: the stored batch no longer passes validation (${Object.entries(batch.errors).slice(0, 3).map(([k, v]) => `${k}: ${v.join(" ")}`).join("; ")}). Re-send it after fixing.`));
      }
      const records = batch.records as Records;
      const duplicates = findDuplicateIds(records);
      if (duplicates.size > 0) {
        const outcome = duplicateIdsOutcome(records.length, duplicates);
        return finish(outcome, records, outcome.rejections);
      }

      const references = resource.references.map((reference) => {
        const target = resourceByPath(reference.resource)!;
        return { ...reference, target, ids: new RecordStore(db, target).idSet(job.environmentId) };
      });
      const rejections: Rejection[] = [];
      const accepted = references.length === 0 ? records : records.filter((record, index) => {
        for (const reference of references) {
          const value = record[reference.field] as string;
          if (!reference.ids.has(value)) {
            const label = `'${displayName(reference.field)}'`;
            rejections.push({
              index,
              id: record.id,
              field: reference.field,
              reason: `Unknown ${reference.field} (no such ${reference.target.noun} in this environment)`,
              message: `${label} '${value}' does not exist in this environment. Import it first with POST /v2/${reference.target.path}, or correct the ${reference.field}.`,
            });
            return false;
          }
        }
        return true;
      });
      new RecordStore(db, resource).upsertAll(job.environmentId, jobId, accepted);
      return finish(recordOutcome(records.length, rejections), records, rejections);
    },
    { behavior: "immediate" },
  );
}
