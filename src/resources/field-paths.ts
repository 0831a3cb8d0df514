import type { TObject, TSchema } from "@sinclair/typebox";

/**
 * The fields a resource defines, as a file names them: `name`, and `geolocation.locationStart` for a field of a
 * nested object (a CSV header's dotted column, a JSON record's nested key): what `importd import` reads, and what an
 * export writes.
 */
export type FieldPaths = {
  /** Every field, nested ones as dotted paths; an object field itself (`geolocation`) too, for JSON records. */
  all: Set<string>;
  /** The paths that hold values (not objects): what a CSV column can name. */
  leaves: string[];
  /** Top-level fields every record must have. */
  required: string[];
  /** Dotted paths of the number fields, whose CSV cells become numbers. */
  numbers: Set<string>;
};

const cache = new WeakMap<TObject, FieldPaths>();

export function fieldPaths(schema: TObject): FieldPaths {
  let paths = cache.get(schema);
  if (paths) return paths;
  paths = { all: new Set(), leaves: [], required: [...((schema as { required?: string[] }).required ?? [])], numbers: new Set() };
  const walk = (object: TSchema, prefix: string) => {
    for (const [name, property] of Object.entries((object as { properties?: Record<string, TSchema> }).properties ?? {})) {
      const path = `${prefix}${name}`;
      paths!.all.add(path);
      const type = (property as { type?: string }).type;
      if (type === "object") walk(property, `${path}.`);
      else paths!.leaves.push(path);
      if (type === "number" || type === "integer") paths!.numbers.add(path);
    }
  };
  walk(schema, "");
  cache.set(schema, paths);
  return paths;
}

