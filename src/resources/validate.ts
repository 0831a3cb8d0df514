import { Kind, Type, TypeRegistry, type TObject, type TSchema } from "@sinclair/typebox";
import { TypeCompiler, type TypeCheck } from "@sinclair/typebox/compiler";

/**
 * Request-time validation of a batch against a resource's TypeBox schema.
 *
 * The schema is the single source of truth: the same object documents the record in OpenAPI and
 * drives these checks. The walker understands the small subset of JSON Schema the resources use
 * (object, string with minLength/maxLength/pattern, number with minimum, enums) and words
 * its messages for people, in the style of the spec's example: `'Sub Area Id' must not be empty.`
 *
 * Speed: the walker builds labels and messages and copies each record, several times the cost of TypeBox's
 * compiled checker (figures in docs/performance.md). So a record is first checked by the compiled checker
 * (the same schema, generated code); only
 * records it refuses are walked, to explain them, and to accept what the walker allows and it does not
 * (a `null` optional field; text within its length in characters but not in the UTF-16 units the checker counts).
 * Everything the checker accepts the walker accepts too: same types, lengths, patterns (not blank, no NUL
 * character), minimums and enums, unknown fields allowed by both. All but one thing:
 * the walker makes a lone surrogate U+FFFD, as both stores would store it, so that the apply step compares ids
 * and references as they are stored. No pattern can find one (a regular expression without the `u` flag sees a
 * pair as two surrogates), so a body that may hold one has every record walked (see jsonMayHoldLoneSurrogate).
 */

export type FieldErrors = Record<string, string[]>;

/** A rule that looks at several fields of one (already type-checked) record. */
export type RecordRule<T> = (record: T) => Array<{ field: string; message: string }>;

/**
 * `records` as they are applied (the schema's fields, text as the stores keep it); `sent`, the same records as they
 * came (unknown fields and nulls included), for the rows of those the job rejects.
 */
export type BatchValidation<T> =
  | { ok: true; records: T[]; sent: readonly unknown[] }
  | { ok: false; errors: FieldErrors; errorCount: number; truncated: boolean };

export const maxErrorKeys = 1000;

/** `subAreaId` → `Sub Area Id`, `geolocation.locationStart` → `Location Start`. */
export function displayName(field: string): string {
  const last = field.slice(field.lastIndexOf(".") + 1);
  const words = last.replace(/([a-z0-9])([A-Z])/g, "$1 $2");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

const quote = (value: string, max = 60) =>
  `'${value.length > max ? `${value.slice(0, max)}…` : value}'`;

function describeType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  if (typeof value === "string") return "a string";
  if (typeof value === "number") return "a number";
  if (typeof value === "boolean") return "a boolean";
  return typeof value;
}

// Both say the NUL ban where generators and validators look (PostgreSQL's text cannot hold U+0000). Linear: the
// leading white space and the one character after it cannot overlap, so no input makes them backtrack.
const requiredTextPattern = "^\\s*[^\\s\\u0000][^\\u0000]*$";
const optionalTextPattern = "^[^\\u0000]*$";
const isBlank = (value: string) => !/\S/.test(value);

/**
 * A text's length as JSON Schema's maxLength counts it, and as PostgreSQL does: in characters (code points), so an
 * emoji is one, not the two UTF-16 units of `value.length`. Asked only of a text whose units are over the limit.
 */
function codePoints(value: string): number {
  let count = 0;
  for (const _ of value) count++;
  return count;
}

const enumValues = (schema: TSchema): string[] | undefined => schema.enum as string[] | undefined;

/** Collects into `report` every problem of `value` against `schema`; returns the normalized value. */
function checkValue(
  schema: TSchema,
  value: unknown,
  path: string,
  name: string,
  report: (path: string, message: string) => void,
): unknown {
  const label = `'${displayName(name)}'`;
  const allowed = enumValues(schema);
  if (allowed) {
    if (typeof value !== "string") {
      report(path, `${label} must be a string, one of: ${allowed.join(", ")}. You sent ${describeType(value)}.`);
    } else if (isBlank(value)) {
      // Every literal set here is a required code: blank reads as missing, like any required text.
      report(path, `${label} must not be empty.`);
    } else if (!allowed.includes(value)) {
      report(path, `${label} must be one of: ${allowed.join(", ")}. You entered ${quote(value)}.`);
    }
    return value;
  }
  switch (schema.type) {
    case "string": {
      if (typeof value !== "string") {
        report(path, `${label} must be a string. You sent ${describeType(value)}.`);
        return value;
      }
      if (schema.pattern === requiredTextPattern && isBlank(value)) {
        report(path, `${label} must not be empty.`);
      } else if (schema.maxLength !== undefined && value.length > schema.maxLength && codePoints(value) > schema.maxLength) {
        report(path, `${label} must be ${schema.maxLength} characters or fewer. You entered ${codePoints(value)} characters.`);
      }
      if (value.includes("\u0000")) {
        // PostgreSQL's text cannot hold it: refused on every backend alike, so that a batch means the same on each,
        // and what a SQLite database takes from now on can be copied to PostgreSQL (importd storage copy).
        report(path, `${label} must not contain the NUL character (\\u0000). Remove it and send the batch again.`);
      }
      // Stored as text (UTF-8), a lone surrogate becomes U+FFFD on both stores: the records applied are as stored.
      return value.toWellFormed();
    }
    case "number": {
      if (typeof value !== "number") {
        report(path, `${label} must be a number. You sent ${describeType(value)}.`);
        return value;
      }
      if (!Number.isFinite(value)) {
        report(path, `${label} must be a finite number.`);
      } else if (schema.minimum !== undefined && value < schema.minimum) {
        report(path, `${label} must be greater than or equal to ${schema.minimum}. You entered ${value}.`);
      }
      return value;
    }
    case "object": {
      if (typeof value !== "object" || value === null || Array.isArray(value)) {
        report(path, `${label} must be an object. You sent ${describeType(value)}.`);
        return value;
      }
      return checkObject(schema as TObject, value as Record<string, unknown>, `${path}.`, report);
    }
    default:
      throw new Error(`validate.ts does not know schema type ${String(schema.type)} (at ${path})`);
  }
}

function checkObject(
  schema: TObject,
  input: Record<string, unknown>,
  prefix: string,
  report: (path: string, message: string) => void,
): Record<string, unknown> {
  const required = schema.required ?? [];
  // Only known fields are copied: unknown fields are ignored, and keys such as `__proto__` never reach us.
  const output: Record<string, unknown> = {};
  for (const [field, fieldSchema] of Object.entries(schema.properties)) {
    const value = Object.hasOwn(input, field) ? input[field] : undefined;
    const path = `${prefix}${field}`;
    // `null` counts as missing, for required and optional fields alike.
    if (value === undefined || value === null) {
      if (required.includes(field)) report(path, `'${displayName(field)}' must not be empty.`);
      continue;
    }
    output[field] = checkValue(fieldSchema, value, path, field, report);
  }
  return output;
}

type Copier = (input: Record<string, unknown>) => Record<string, unknown>;

/**
 * A function copying the schema's known fields of a record the checker accepted (the walker's output, fast).
 * Runs once per record of every batch, so it is compiled into one object literal (as TypeBox compiles its
 * checker): 100k assets took 5-10 ms against 50 for a loop over the field names, and every record comes out
 * with the same shape, which the code reading them is compiled for. A field the record lacks is there as
 * `undefined` (which JSON and every reader treat as absent).
 */
function knownFieldsCopier(schema: TObject): Copier {
  const names = Object.keys(schema.properties);
  const nested = names.map((name) => (schema.properties[name]!.type === "object" ? knownFieldsCopier(schema.properties[name] as TObject) : undefined));
  const fields = names.map((name, i) => {
    const value = `input[${JSON.stringify(name)}]`;
    return `${JSON.stringify(name)}: ${nested[i] ? `${value} === undefined ? undefined : nested[${i}](${value})` : value}`;
  });
  const copy = new Function("nested", `return (input) => ({ ${fields.join(", ")} });`);
  return copy(nested) as Copier;
}

const compiled = new WeakMap<TObject, { checker: TypeCheck<TObject>; copy: Copier }>();

function compiledValidator(schema: TObject) {
  let validator = compiled.get(schema);
  if (!validator) compiled.set(schema, (validator = { checker: TypeCompiler.Compile(schema), copy: knownFieldsCopier(schema) }));
  return validator;
}

const surrogateEscapes = ["\\ud", "\\uD"];
// The second hex digit of a surrogate's escape, \uD800 to \uDFFF: 8, 9, a-f or A-F. Past the end of the text
// it is undefined (a byte) or NaN (a character code), and neither is one.
const isSurrogateDigit = (code: number | undefined) =>
  code !== undefined && ((code >= 0x38 && code <= 0x39) || (code >= 0x61 && code <= 0x66) || (code >= 0x41 && code <= 0x46));

/**
 * Whether a string of this JSON text may hold a lone surrogate, which the stores cannot keep as it is: JSON writes
 * one only as an escape from `\uD800` to `\uDFFF` (raw, it is not UTF-8). Text without such an escape holds none;
 * a surrogate pair's escapes (an emoji, from an encoder that escapes everything beyond ASCII) only cost a walk.
 * Looking costs a few milliseconds in 35 MB. Pass the answer to validateBatch as `mayHoldLoneSurrogate`.
 */
export function jsonMayHoldLoneSurrogate(json: string | Uint8Array): boolean {
  const text = typeof json === "string" ? json : Buffer.from(json.buffer, json.byteOffset, json.byteLength);
  for (const escape of surrogateEscapes) {
    for (let at = text.indexOf(escape); at !== -1; at = text.indexOf(escape, at + escape.length)) {
      if (isSurrogateDigit(typeof text === "string" ? text.charCodeAt(at + 3) : text[at + 3])) return true;
    }
  }
  return false;
}

/**
 * Validates a parsed request body. Shape problems of the body itself go under `$`; record problems under
 * `[index].field`. The error map is capped at `maxErrorKeys` keys so that a bad 100 MB body does not produce
 * a 100 MB answer; `errorCount` still counts them all. `mayHoldLoneSurrogate`: false only when no string of the
 * body can hold a lone surrogate (see jsonMayHoldLoneSurrogate): then the compiled checker may vouch
 * for a record.
 */
export function validateBatch<T>(
  schema: TObject,
  rules: RecordRule<T>[],
  body: unknown,
  { mayHoldLoneSurrogate = true }: { mayHoldLoneSurrogate?: boolean } = {},
): BatchValidation<T> {
  const { report, failed, count } = errorCollector();
  if (!Array.isArray(body) || body.length === 0) return notABatch(body, "record", '[{"id": "..."}]', report, failed);
  const { checker, copy } = compiledValidator(schema);
  const records: T[] = new Array(body.length);
  for (let index = 0; index < body.length; index++) {
    const item = body[index];
    if (typeof item !== "object" || item === null || Array.isArray(item)) {
      report(`[${index}]`, `Each record must be a JSON object. You sent ${describeType(item)}.`);
      continue;
    }
    const before = count();
    const fields = item as Record<string, unknown>;
    const record = (!mayHoldLoneSurrogate && checker.Check(fields) ? copy(fields) : checkObject(schema, fields, `[${index}].`, report)) as T;
    // Cross-field rules only make sense once every field has the right type.
    if (count() === before) {
      for (const rule of rules) {
        for (const problem of rule(record)) report(`[${index}].${problem.field}`, problem.message);
      }
    }
    records[index] = record;
  }
  if (count() > 0) return failed();
  return { ok: true, records, sent: body };
}

/**
 * Where a batch's problems are collected: under their path, a path's messages together, the map capped at
 * `maxErrorKeys` keys (`truncated` then) while `count` counts them all.
 */
function errorCollector() {
  const errors: FieldErrors = {};
  let keys = 0;
  let errorCount = 0;
  let truncated = false;
  const report = (path: string, message: string) => {
    errorCount++;
    const existing = errors[path];
    if (existing) existing.push(message);
    else if (keys < maxErrorKeys) {
      errors[path] = [message];
      keys++;
    } else truncated = true;
  };
  return { report, count: () => errorCount, failed: () => ({ ok: false as const, errors, errorCount, truncated }) };
}

/** The `$` problem of a body that is not a JSON array of at least one item (a `noun`, as `example` shows). */
function notABatch(body: unknown, noun: string, example: string, report: (path: string, message: string) => void, failed: () => BatchValidation<never>) {
  if (!Array.isArray(body)) report("$", `The request body must be a JSON array of ${noun}s, for example ${example}. You sent ${describeType(body)}.`);
  else report("$", `The request body must contain at least one ${noun}. You sent an empty array.`);
  return failed();
}

/** The longest id a record may have, as the resources' schemas say. */
export const maxIdLength = 64;

/** Why `item` is not a record's id, in the words of the end of a message; undefined when it is one. */
function idProblem(item: unknown): string | undefined {
  if (typeof item !== "string") return `You sent ${describeType(item)}.`;
  if (item === "") return "You sent an empty string.";
  if (isBlank(item)) return "You sent only white space.";
  if (item.length > maxIdLength && codePoints(item) > maxIdLength) return `You sent ${codePoints(item)} characters.`;
  if (item.includes("\u0000")) return "You sent the NUL character (\\u0000) in it.";
  return undefined;
}

/**
 * Validates a parsed delete body: a JSON array of ids, each as a record's id must be (not blank, at most 64
 * characters, no NUL); problems under `[index]`, the body's own under `$`. The ids come back as records `{ id }`, a
 * lone surrogate made U+FFFD as the stores keep ids; `sent` is the same (the rows of rejected ids carry `{ id }`).
 */
export function validateIds(body: unknown): BatchValidation<{ id: string }> {
  const { report, failed, count } = errorCollector();
  if (!Array.isArray(body) || body.length === 0) return notABatch(body, "id", '["A-1"]', report, failed);
  const records: Array<{ id: string }> = new Array(body.length);
  for (let index = 0; index < body.length; index++) {
    const item: unknown = body[index];
    const problem = idProblem(item);
    if (problem) report(`[${index}]`, `'Id' must be a non-empty string of at most ${maxIdLength} characters, e.g. "A-1". ${problem}`);
    else records[index] = { id: (item as string).toWellFormed() };
  }
  if (count() > 0) return failed();
  return { ok: true, records, sent: records };
}

/**
 * A cross-field rule `start` ≤ `end` (two number fields of one object, when both are present), said where
 * generators and validators look: `schema` goes into the object's schema options (a description, and the vendor
 * extension `x-importd-ordered`, a list of `{start, end}`), and `rule` checks it (`within`: the path of the
 * nested object that holds the pair, such as `geolocation`).
 */
export function ordered(start: string, end: string) {
  const message = `'${displayName(start)}' must be less than or equal to '${displayName(end)}'.`;
  return {
    schema: {
      description: `\`${start}\` must be less than or equal to \`${end}\` when both are present; otherwise the batch is a 400 naming \`${start}\`.`,
      "x-importd-ordered": [{ start, end }],
    },
    rule:
      (within?: string): RecordRule<Record<string, unknown>> =>
      (record) => {
        const holder = (within === undefined ? record : record[within]) as Record<string, number | undefined> | undefined;
        const [low, high] = [holder?.[start], holder?.[end]];
        return low !== undefined && high !== undefined && low > high ? [{ field: within === undefined ? start : `${within}.${start}`, message }] : [];
      },
  };
}

/** Schema options for a required text field: present, not blank, bounded, without NUL. */
export const requiredText = (maxLength: number, description?: string) => ({
  minLength: 1,
  maxLength,
  pattern: requiredTextPattern,
  ...(description ? { description } : {}),
});

// A set of codes: TypeBox's own types only, never Elysia's `t`, which would bring the whole server framework into the
// console's bundle (the browser reads these definitions too). A kind of its own, which the compiled checkers check.
const codeKind = "ImportdCode";
if (!TypeRegistry.Has(codeKind)) TypeRegistry.Set(codeKind, (schema: { enum: readonly string[] }, value) => typeof value === "string" && schema.enum.includes(value));

/**
 * One of `values`, written as JSON Schema's `enum`: never a union of constants, which generated clients read as its first
 * constant only. No default: these are required codes.
 */
export const oneOf = <T extends string>(values: readonly [T, ...T[]]) => Type.Unsafe<T>({ [Kind]: codeKind, type: "string", enum: [...values] });

/** Schema options for an optional text field: bounded, without NUL. */
export const optionalText = (maxLength: number) => ({ maxLength, pattern: optionalTextPattern });
