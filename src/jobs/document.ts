import { t, type Static } from "elysia";
import { Type } from "@sinclair/typebox";
import type { Job } from "../store/ports";
import { jobTypes } from "../resources/registry";
import { isTerminal, jobOperations, jobStatuses, type JobOperation, type JobStatus } from "../domain/job";

// Integers the server sends are TypeBox's plain Type.Integer: Elysia's t.Integer writes its input coercion
// (a string or an integer) into the OpenAPI document, and generated clients would type them so.
const timestamp = (description: string) => t.Union([t.String({ format: "date-time" }), t.Null()], { description });

export const recordErrorSchema = t.Object({
  index: Type.Integer({ description: "The record's index in the batch." }),
  id: t.String(),
  field: t.String(),
  message: t.String(),
});

export const jobOutputSchema = t.Object({
  message: t.String({ description: "For people: how many records failed, which (index and id) and why." }),
  total: Type.Integer(),
  applied: Type.Integer(),
  rejected: Type.Integer(),
  errors: t.Array(recordErrorSchema, { description: "For programs: one entry per rejected record (capped at 1000; the message says when)." }),
  created: t.Optional(Type.Integer({ description: "Applied records that did not exist before. applied = created + updated + unchanged." })),
  updated: t.Optional(Type.Integer({ description: "Applied records that existed and differed: written." })),
  unchanged: t.Optional(Type.Integer({ description: "Applied records equal to the stored ones in every field: not written (their updatedAt and lastJobId stay)." })),
  deleted: t.Optional(Type.Integer({ description: "A delete job's: records deleted (applied = deleted + notFound). A sync's completion's: records it deleted, or would have (a dry run), of the total it considered." })),
  notFound: t.Optional(Type.Integer({ description: "A delete job's: ids that named no record (never imported, already deleted, or repeated in the batch): not an error." })),
  canceled: t.Optional(t.Literal(true, { description: "Present, true, when the job was canceled on request before it started (POST /v2/status/{id}/cancel)." })),
});

export const jobDocumentSchema = t.Object({
  id: Type.Integer(),
  // Enums as enums (not unions of constants), so that generated clients get an enum type.
  importJobType: Type.Unsafe<string>({ type: "string", enum: [...jobTypes], examples: ["Asset"] }),
  importJobStatus: Type.Unsafe<JobStatus>({ type: "string", enum: [...jobStatuses], examples: ["Succeeded"] }),
  operation: Type.Unsafe<JobOperation>({
    type: "string",
    enum: [...jobOperations],
    examples: ["upsert"],
    description: "What the job does to the records of its importJobType: upsert (an import, POST /v2/<resource>), delete (POST /v2/deletions/<resource>) or syncCompletion (a sync's completion, POST /v2/syncs/{id}/complete: " +
      "it deletes the records of its importJobType that the sync's imports did not send; output.total is how many it considered, output.deleted how many it deleted, output.rejected how many were still referred to).",
  }),
  statusUrl: t.String({ examples: ["/v2/status/17"], description: "Relative to the environment's base URL." }),
  output: t.Union([jobOutputSchema, t.Null()]),
  createdAt: t.String({ format: "date-time" }),
  startedAt: timestamp(
    "When the worker last started it; null while Pending, and while Processing in a run of small jobs behind the jobs before it (it starts when the one before it ends).",
  ),
  completedAt: timestamp("When it reached a terminal state."),
  recordCount: Type.Integer(),
  dryRun: t.Boolean({ description: "A dry run (?dryRun=true): applied nothing; its output says what applying would have done." }),
});
export type JobDocument = Static<typeof jobDocumentSchema>;

export function jobDocument(job: Job): JobDocument {
  return {
    id: job.id,
    importJobType: job.type,
    importJobStatus: job.status,
    operation: job.operation,
    statusUrl: `/v2/status/${job.id}`,
    output: isTerminal(job.status) ? job.output : null,
    createdAt: job.createdAt,
    startedAt: job.startedAt,
    completedAt: job.completedAt,
    recordCount: job.recordCount,
    dryRun: job.dryRun,
  };
}

/** How long a poller should wait before asking again: longer for bigger jobs. */
export const retryAfterSeconds = (job: Job) => (job.recordCount > 50_000 ? 2 : 1);
