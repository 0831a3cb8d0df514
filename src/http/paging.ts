import type { OpenAPIV3 } from "openapi-types";
import { validationProblem } from "./problem";

export const defaultPageSize = 100;
export const maxPageSize = 1000;

/**
 * The end of the message for a query parameter's bad value. An empty value (`?limit=`, `?dryRun`) is a 400 too,
 * never "absent": a client that meant to send a value must not silently get the default (a real import, say).
 */
export const youSent = (value: string) =>
  value === "" ? "You sent it empty: give a value, or leave the parameter out." : `You entered '${value.slice(0, 40)}'.`;

/** `?limit=` as a number from 1 to 1000 (default 100, when absent); anything else is a 400 keyed `limit`. */
export function pageLimit(text: string | undefined): number {
  if (text === undefined) return defaultPageSize;
  const limit = Number(text);
  if (!/^\d+$/.test(text) || limit < 1 || limit > maxPageSize) {
    throw validationProblem({ limit: [`'Limit' must be a whole number from 1 to ${maxPageSize}. ${youSent(text)}`] });
  }
  return limit;
}

/**
 * `limit` and `after`. The cursor is a string, as `nextCursor` is, so that a client passes one back as it came; its
 * pattern, where the server enforces one, is in the document too.
 */
export const pageParameters = (afterDescription: string, afterPattern?: RegExp): OpenAPIV3.ParameterObject[] => [
  { name: "limit", in: "query", required: false, schema: { type: "integer", minimum: 1, maximum: maxPageSize, default: defaultPageSize }, description: "Page size." },
  { name: "after", in: "query", required: false, schema: { type: "string", minLength: 1, ...(afterPattern ? { pattern: afterPattern.source } : {}) }, description: afterDescription },
];

/** A page and the cursor of the next one (null on the last page). */
export const page = <T>(items: T[], limit: number, cursor: (item: T) => string | number) => ({
  items,
  nextCursor: items.length === limit ? String(cursor(items[items.length - 1]!)) : null,
});
