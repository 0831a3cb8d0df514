import type { Static, TObject } from "@sinclair/typebox";
import type { RecordRule } from "./validate";

/** A job-time check: the record's `field` (a required string) must name a record of `resource` in the same environment. */
export type Reference = { field: string; resource: string };

/**
 * Everything the generic import pipeline needs to know about one import resource.
 * Adding a resource means writing one of these and listing it in registry.ts.
 */
export type ResourceDefinition<S extends TObject = TObject> = {
  /** Path segment under /v2: `POST /v2/<path>`, `GET /v2/<path>/{id}`. */
  path: string;
  /** `importJobType` of its jobs. */
  jobType: string;
  /** What one record is called in messages, e.g. "sub area". */
  noun: string;
  /** One record on the wire; drives validation, types and OpenAPI. */
  schema: S;
  /** A batch for the OpenAPI document that is applied in full once the examples of the resources before it are. */
  example: Static<S>[];
  rules: RecordRule<Static<S>>[];
  references: Reference[];
  /** The record as stored: its fields other than id, by column property name (each store keeps its own tables). */
  toRow(record: Static<S>): Record<string, unknown>;
  fromRow(row: Record<string, unknown>): Static<S>;
};

/** Typed while written; stored in the registry with its record type erased. */
export const defineResource = <S extends TObject>(definition: ResourceDefinition<S>) =>
  definition as unknown as ResourceDefinition;

/** Copies the row's non-null values for `fields`: absent optional fields stay absent on the wire. */
export function presentFields(row: Record<string, unknown>, fields: readonly string[]) {
  const out: Record<string, unknown> = {};
  for (const field of fields) if (row[field] !== null && row[field] !== undefined) out[field] = row[field];
  return out;
}
