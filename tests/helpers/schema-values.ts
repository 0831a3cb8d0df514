import fc from "fast-check";

// fast-check arbitraries drawn from the OpenAPI document's own JSON Schemas: the values a schema allows, and
// values that break it in exactly one field, with the key a 400 must name. The subset is the one the document
// uses (object, array, string with lengths and pattern, number and integer with bounds, enum, anyOf, null) and
// the vendor extension x-importd-ordered; anything else throws, so that a new keyword cannot be skipped quietly.
// json-schema-faker would sample these too, but from its own random source: fast-check could neither repeat a
// failure by its seed nor shrink it.

export type Schema = {
  type?: string;
  enum?: unknown[];
  anyOf?: Schema[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: unknown;
  items?: Schema;
  minItems?: number;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  default?: unknown;
  description?: string;
  format?: string;
  example?: unknown;
  "x-importd-ordered"?: Array<{ start: string; end: string }>;
};

const known = new Set(["type", "enum", "anyOf", "properties", "required", "additionalProperties", "items", "minItems", "pattern", "minLength", "maxLength", "minimum", "maximum", "default", "description", "format", "example", "examples", "x-importd-ordered"]);

function checked(schema: Schema): Schema {
  const unknown = Object.keys(schema).filter((key) => !known.has(key));
  if (unknown.length > 0) throw new Error(`schema-values.ts does not know ${unknown.join(", ")} (in ${JSON.stringify(schema).slice(0, 200)})`);
  return schema;
}

/** Length as JSON Schema counts it: in code points. */
const codePoints = (text: string) => [...text].length;

/** Any code point, the NUL character and white space of every kind included, by length in code points. */
const text = (minLength: number, maxLength: number) => fc.string({ unit: "binary", minLength, maxLength, size: "max" });

/** The values `schema` allows. */
export function valuesOf(schema: Schema): fc.Arbitrary<unknown> {
  checked(schema);
  if (schema.anyOf) return fc.oneof(...schema.anyOf.map(valuesOf));
  if (schema.enum) return fc.constantFrom(...schema.enum);
  switch (schema.type) {
    case "null":
      return fc.constant(null);
    case "boolean":
      return fc.boolean();
    case "integer":
      return fc.integer({ min: schema.minimum ?? Number.MIN_SAFE_INTEGER, max: schema.maximum ?? Number.MAX_SAFE_INTEGER });
    case "number":
      return fc.double({ min: schema.minimum, max: schema.maximum, noNaN: true, noDefaultInfinity: true });
    case "string":
      return textsOf(schema);
    case "array":
      return fc.array(valuesOf(schema.items!), { minLength: schema.minItems ?? 0, maxLength: Math.max(schema.minItems ?? 0, 4) });
    case "object":
      return objectsOf(schema);
  }
  throw new Error(`schema-values.ts has no values for ${JSON.stringify(schema).slice(0, 200)}`);
}

/**
 * Text `schema` allows. Random text meets most patterns (not blank, no NUL) and explores every length and
 * character; text for a pattern it rarely meets (digits only, say) is drawn from the pattern itself.
 */
function textsOf(schema: Schema): fc.Arbitrary<string> {
  // RFC 3339 timestamps (an export's updatedSince), as toISOString writes them and with other offsets.
  if (schema.format === "date-time") {
    const instants = fc.date({ min: new Date("1970-01-01T00:00:00Z"), max: new Date("2100-01-01T00:00:00Z"), noInvalidDate: true });
    return fc.oneof(instants.map((date) => date.toISOString()), instants.map((date) => date.toISOString().replace("Z", "+05:30")));
  }
  const [minLength, maxLength] = [schema.minLength ?? 0, schema.maxLength ?? 100];
  const values = text(minLength, maxLength);
  if (schema.pattern === undefined) return values;
  const pattern = new RegExp(schema.pattern);
  const oftenMet = fc.sample(values, { numRuns: 100, seed: 1 }).filter((value) => pattern.test(value)).length >= 20;
  if (oftenMet) return values.filter((value) => pattern.test(value));
  return fc.stringMatching(pattern).filter((value) => codePoints(value) >= minLength && codePoints(value) <= maxLength);
}

/** A query parameter's values `schema` allows, as sent in a URL (before encoding). */
export const queryValuesOf = (schema: Schema): fc.Arbitrary<string> => valuesOf(schema).map(String);

/** A query parameter's values `schema` forbids (every value is text in a URL, so none is of another type). */
export function brokenQueryValuesOf(schema: Schema): fc.Arbitrary<string> {
  checked(schema);
  if (schema.enum) return fc.string({ maxLength: 12 }).filter((value) => !schema.enum!.map(String).includes(value));
  switch (schema.type) {
    case "boolean":
      return fc.string({ maxLength: 8 }).filter((value) => value !== "true" && value !== "false");
    case "integer": {
      const outside = [fc.string({ maxLength: 8 }).filter((value) => !/^-?[0-9]+$/.test(value)), fc.double({ noInteger: true, noNaN: true, noDefaultInfinity: true }).map(String)];
      // Just outside a bound, where an off-by-one lives.
      if (schema.minimum !== undefined) outside.push(fc.integer({ min: schema.minimum - 100, max: schema.minimum - 1 }).map(String));
      if (schema.maximum !== undefined) outside.push(fc.integer({ min: schema.maximum + 1, max: schema.maximum + 100 }).map(String));
      return fc.oneof(...outside);
    }
    case "string": {
      // Anything that does not even start as a date is no timestamp.
      if (schema.format === "date-time") return fc.string({ maxLength: 24 }).filter((value) => !/^\d{4}-\d{2}-\d{2}/.test(value));
      const wrong = outOfBoundsValuesOf(schema) as fc.Arbitrary<string>[];
      if (wrong.length === 0) throw new Error(`no text breaks ${JSON.stringify(schema)}`);
      return fc.oneof(...wrong);
    }
  }
  throw new Error(`schema-values.ts has no broken query values for ${JSON.stringify(schema).slice(0, 200)}`);
}

/** Fields no schema names, with any JSON: what a client may add and the server must ignore. */
const unknownFields = (schema: Schema) =>
  fc.dictionary(
    fc.string({ minLength: 1, maxLength: 12 }).filter((name) => !(name in (schema.properties ?? {}))),
    fc.jsonValue({ maxDepth: 2 }),
    { maxKeys: 3 },
  );

function objectsOf(schema: Schema): fc.Arbitrary<Record<string, unknown>> {
  const properties = schema.properties ?? {};
  const fields = fc.record(Object.fromEntries(Object.entries(properties).map(([name, property]) => [name, valuesOf(property)])), {
    requiredKeys: schema.required ?? [],
  });
  const extras = schema.additionalProperties === false ? fc.constant({}) : unknownFields(schema);
  return fc.tuple(extras, fields).map(([extra, record]) => inOrder({ ...extra, ...record }, schema));
}

/** The pairs x-importd-ordered names put in order, where both are numbers. */
function inOrder(record: Record<string, unknown>, schema: Schema): Record<string, unknown> {
  for (const { start, end } of schema["x-importd-ordered"] ?? []) {
    const [low, high] = [record[start], record[end]];
    if (typeof low === "number" && typeof high === "number" && low > high) Object.assign(record, { [start]: high, [end]: low });
  }
  return record;
}

/** A schema's non-null branch, and whether null is allowed too (how the document writes an optional field). */
function nonNull(schema: Schema): { base: Schema; nullable: boolean } {
  const branches = schema.anyOf?.filter((branch) => branch.type !== "null");
  if (schema.anyOf && branches!.length === 1) return { base: branches![0]!, nullable: branches!.length < schema.anyOf.length };
  return { base: schema, nullable: schema.type === "null" };
}

type Broken = { value: unknown; key: string };

const otherTypes: Record<string, fc.Arbitrary<unknown>[]> = {
  string: [fc.integer(), fc.boolean(), fc.constant([]), fc.constant({})],
  number: [fc.string({ maxLength: 5 }), fc.boolean(), fc.constant([1])],
  integer: [fc.string({ maxLength: 5 }), fc.boolean(), fc.double({ noInteger: true, noNaN: true, noDefaultInfinity: true })],
  object: [fc.string({ maxLength: 5 }), fc.integer(), fc.constant([])],
};

/** Values that break `schema` (a field's, not null), each alone: of another type, outside a bound, not matching. */
const wrongValuesOf = (schema: Schema): fc.Arbitrary<unknown>[] => [...(otherTypes[schema.type ?? ""] ?? []), ...outOfBoundsValuesOf(schema)];

/** Values of `schema`'s type that break one of its bounds: an enum, a length, a pattern, a minimum or maximum. */
function outOfBoundsValuesOf(schema: Schema): fc.Arbitrary<unknown>[] {
  checked(schema);
  const wrong: fc.Arbitrary<unknown>[] = [];
  if (schema.enum) wrong.push(fc.string({ maxLength: 12 }).filter((value) => !schema.enum!.includes(value)));
  if (schema.type === "string" && (schema.minLength ?? 0) > 0) wrong.push(text(0, schema.minLength! - 1));
  if (schema.type === "string" && schema.maxLength !== undefined) wrong.push(text(schema.maxLength + 1, schema.maxLength + 8));
  if (schema.type === "string" && schema.pattern !== undefined) {
    const pattern = new RegExp(schema.pattern);
    // Lengths within the bounds, and mostly the characters patterns are about: white space and NUL.
    const characters = fc.oneof(fc.constantFrom(" ", "\t", "\n", "\u00a0", "\u3000", "\u0000"), fc.string({ unit: "binary", minLength: 1, maxLength: 1 }));
    wrong.push(
      fc
        .string({ unit: characters, minLength: Math.max(schema.minLength ?? 0, 1), maxLength: Math.min(schema.maxLength ?? 20, 20) })
        .filter((value) => !pattern.test(value) && codePoints(value) <= (schema.maxLength ?? Infinity)),
    );
  }
  // Strictly beyond: -0 is not below a minimum of 0 (and JSON writes it 0).
  if (schema.minimum !== undefined) wrong.push(fc.double({ max: schema.minimum, noNaN: true, noDefaultInfinity: true }).filter((value) => value < schema.minimum!));
  if (schema.maximum !== undefined) wrong.push(fc.double({ min: schema.maximum, noNaN: true, noDefaultInfinity: true }).filter((value) => value > schema.maximum!));
  return wrong;
}

/**
 * Objects `schema` forbids, each with one field broken, and that field's path (`geolocation.locationStart`): a
 * required field left out or null, a value of another type or outside its bounds, a nested object broken the same
 * way, or a pair x-importd-ordered names out of order.
 */
export function brokenObjectsOf(schema: Schema): fc.Arbitrary<Broken> {
  checked(schema);
  const valid = objectsOf(schema);
  const breaks: fc.Arbitrary<Broken>[] = [];
  const set = (name: string, values: fc.Arbitrary<unknown>) =>
    fc.tuple(valid, values).map(([record, value]): Broken => ({ value: { ...record, [name]: value }, key: name }));
  for (const [name, property] of Object.entries(schema.properties ?? {})) {
    const { base } = nonNull(property);
    if (schema.required?.includes(name)) {
      breaks.push(valid.map((record): Broken => ({ value: Object.fromEntries(Object.entries(record).filter(([field]) => field !== name)), key: name })));
      breaks.push(set(name, fc.constant(null)));
    }
    for (const wrong of wrongValuesOf(base)) breaks.push(set(name, wrong));
    if (base.type === "object") {
      breaks.push(fc.tuple(valid, brokenObjectsOf(base)).map(([record, nested]): Broken => ({ value: { ...record, [name]: nested.value }, key: `${name}.${nested.key}` })));
    }
  }
  for (const { start, end } of schema["x-importd-ordered"] ?? []) {
    const { base } = nonNull(schema.properties![end]!);
    const low = fc.double({ min: base.minimum ?? -1e9, max: 1e9, noNaN: true });
    breaks.push(fc.tuple(valid, low, fc.integer({ min: 1, max: 1_000_000 })).map(([record, value, more]): Broken => ({ value: { ...record, [end]: value, [start]: value + more }, key: start })));
  }
  return fc.oneof(...breaks);
}

/**
 * The items of a request's array `schema` forbids, each with the key a 400 must name under the item's index: an
 * object's broken field (brokenObjectsOf), or, for an item that is not an object (a delete job's id), the item
 * itself broken, under its index alone (key "").
 */
export function brokenItemsOf(schema: Schema): fc.Arbitrary<Broken> {
  if (schema.type === "object") return brokenObjectsOf(schema);
  return fc.oneof(...wrongValuesOf(schema)).map((value): Broken => ({ value, key: "" }));
}
