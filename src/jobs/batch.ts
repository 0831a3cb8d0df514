import { JobOperation } from "../domain/job";
import type { ResourceDefinition } from "../resources/definition";
import { jsonMayHoldLoneSurrogate, validateBatch, validateIds, type BatchValidation, type FieldErrors } from "../resources/validate";

/** Decodes and parses a request body; the problem, if any, is worded for the `$` key of a 400. */
export function parseBody(bytes: Uint8Array): { ok: true; value: unknown } | { ok: false; message: string } {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return { ok: false, message: "The request body is not valid UTF-8. Send JSON encoded as UTF-8." };
  }
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    const reason = error instanceof RangeError ? "it is nested too deeply" : (error as Error).message;
    return { ok: false, message: `The request body is not valid JSON (${reason}).` };
  }
}

export type Records = Array<{ id: string } & Record<string, unknown>>;

/** A batch that passed validation, as applying reads it (see BatchValidation). */
export type ValidBatch = { records: Records; sent: readonly unknown[] };

/**
 * Parse and validate, the same way at request time and when the job is applied: an import's records, or a delete
 * job's ids (as records `{ id }`). A sync's completion names no records: its body is its limits (made by the route,
 * read by jobs/syncs.ts), kept whole as the one thing it sent.
 */
export function readBatch(resource: ResourceDefinition, bytes: Uint8Array, operation: JobOperation = JobOperation.Upsert): BatchValidation<Records[number]> {
  const parsed = parseBody(bytes);
  if (!parsed.ok) {
    const errors: FieldErrors = { $: [parsed.message] };
    return { ok: false, errors, errorCount: 1, truncated: false };
  }
  if (operation === JobOperation.Delete) return validateIds(parsed.value);
  if (operation === JobOperation.SyncCompletion) return { ok: true, records: [], sent: [parsed.value] };
  return validateBatch(resource.schema, resource.rules as never, parsed.value, { mayHoldLoneSurrogate: jsonMayHoldLoneSurrogate(bytes) });
}
