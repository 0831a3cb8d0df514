import { useState } from "preact/hooks";

/**
 * Where a view is in a listing paged by cursors (each page's nextCursor is the next page's `after`): the cursors of
 * the pages up to the one shown (the first page's is undefined), so that it can go back as well as on.
 */
export function useCursorPages() {
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined]);
  return { after: cursors[cursors.length - 1], onFirst: cursors.length === 1, setCursors, cursors };
}

type CursorPages = ReturnType<typeof useCursorPages>;

/** The buttons that move through the pages: back to the first (when `first` names it), back one, and on to `next`. */
export function PageButtons({ pages, next, label, names }: { pages: CursorPages; next: string | null | undefined; label: string; names: { first?: string; back: string; on: string } }) {
  const { cursors, setCursors, onFirst } = pages;
  return (
    <nav class="pages" aria-label={label}>
      {names.first && <button type="button" disabled={onFirst} onClick={() => setCursors([undefined])}>{names.first}</button>}
      <button type="button" disabled={onFirst} onClick={() => setCursors(cursors.slice(0, -1))}>{names.back}</button>
      <button type="button" disabled={!next} onClick={() => next && setCursors([...cursors, next])}>{names.on}</button>
    </nav>
  );
}
