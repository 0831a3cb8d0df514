/**
 * Cuts a file's records into requests of at most `maxBytes`, in the file's order, so that no request holds the
 * same id twice: importd fails a batch with a duplicate id as a whole (DECISIONS 4), while a file's later record
 * with an id must simply win (DECISIONS 12). A record whose id is already in the request being filled goes to a
 * later request instead, the first one after every request that holds its id; requests are sent and applied in
 * order, so each id's records are applied in the file's order and the last one wins, however the file is cut.
 * Records of different ids may change requests relative to each other, which changes nothing they do.
 *
 * Memory stays bounded: at most `maxOpen` requests are filled at once. A file that repeats one id more often
 * than that gets requests of fewer records, never two of one id.
 */

export type Planned<T> = { items: T[]; bytes: number };

export class Chunker<T> {
  /** open[0] is filled with every record of a new id; the others hold records deferred behind it. */
  private readonly open: Array<Planned<T> & { ids: Map<string, T> }> = [];

  /** `onRepeat` hears of each record put behind an earlier one with its id (the latest before it). */
  constructor(
    private readonly maxBytes: number,
    private readonly emptyBytes: number,
    private readonly onRepeat: (item: T, earlier: T) => void = () => {},
    private readonly maxOpen = 8,
  ) {}

  /** Adds a record (`id` undefined when it has none to compare); answers the requests completed by it, in order. */
  add(item: T, id: string | undefined, bytes: number): Array<Planned<T>> {
    const done: Array<Planned<T>> = [];
    let target = 0;
    if (id !== undefined) {
      for (let at = this.open.length - 1; at >= 0; at--) {
        const earlier = this.open[at]!.ids.get(id);
        if (earlier !== undefined) {
          target = at + 1;
          this.onRepeat(item, earlier);
          break;
        }
      }
    }
    // A later request has room for it unless it is full; the first is sent once a new record does not fit.
    while (target < this.open.length && this.full(this.open[target]!, bytes)) {
      if (target === 0) done.push(this.shift());
      else target++;
    }
    while (this.open.length <= target) this.open.push({ items: [], bytes: this.emptyBytes, ids: new Map() });
    const chunk = this.open[target]!;
    chunk.items.push(item);
    chunk.bytes += bytes;
    if (id !== undefined) chunk.ids.set(id, item);
    while (this.open.length > this.maxOpen) done.push(this.shift());
    return done;
  }

  /** The requests still being filled, in order: the end of the file. */
  end(): Array<Planned<T>> {
    const done: Array<Planned<T>> = [];
    while (this.open.length > 0) done.push(this.shift());
    return done;
  }

  private full(chunk: Planned<T>, bytes: number): boolean {
    return chunk.items.length > 0 && chunk.bytes + bytes > this.maxBytes;
  }

  private shift(): Planned<T> {
    const { items, bytes } = this.open.shift()!;
    return { items, bytes };
  }
}
