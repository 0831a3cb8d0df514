
/**
 * The fields a resource defines, as a file names them: `name`, and `geolocation.locationStart` for a field of a
 * nested object (a CSV header's dotted column, a JSON record's nested key). What a file holds beyond them is
 * reported before anything is sent (DECISIONS 12): the server would ignore it, and the user would never know.
 */

/**
 * Columns and fields whose names start with `_` (a rejected file's `_error` and `_line`) are notes, not data; so are
 * updatedAt and lastJobId, which importd adds to every record it gives back (GET, an export): a file of exported
 * records is imported again as it is.
 */
export const isMeta = (name: string) => name.startsWith("_") || name === "updatedAt" || name === "lastJobId";

/** A JSON object of `_` fields alone: a rejected file's note before a line it gives back as it was, not a record. */
export function isNote(value: object): boolean {
  let any = false;
  for (const name in value) {
    if (!isMeta(name)) return false;
    any = true;
  }
  return any;
}

export { fieldPaths, type FieldPaths } from "../resources/field-paths";

/** Edits (insert, delete, substitute, swap two neighbours) between two short names. */
function distance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) rows[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = best;
    }
  }
  return rows[a.length]![b.length]!;
}

/**
 * The defined field a misspelled name most likely meant (`descripton` → `description`, `startpoint` →
 * `startPoint`, `Sub Area Id` → `subAreaId`), or undefined when none is close: compared without case, spaces,
 * `_` or `-`, and close means at most a third of the name's letters differ.
 */
export function nearestField(name: string, candidates: Iterable<string>): string | undefined {
  const plain = (text: string) => text.toLowerCase().replace(/[\s_-]+/g, "");
  const wanted = plain(name);
  if (wanted === "") return undefined;
  let best: { field: string; edits: number } | undefined;
  for (const field of candidates) {
    const edits = distance(wanted, plain(field));
    if (edits <= Math.max(1, Math.floor(wanted.length / 3)) && (!best || edits < best.edits)) best = { field, edits };
  }
  return best?.field;
}

/** A name from a file as a message shows it: quoted, control characters escaped, cut short. */
export function shown(name: string): string {
  const text = JSON.stringify(name.length > 60 ? `${name.slice(0, 60)}…` : name);
  return `'${text.slice(1, -1)}'`;
}
