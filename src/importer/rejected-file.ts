import { stringify } from "csv-stringify/sync";
import { createWriteStream, rmSync, type WriteStream } from "node:fs";
import { basename, dirname, extname, join } from "node:path";
import type { Format, SourceRecord } from "./source";

/** `data/assets.csv` → `data/assets.rejected.csv` */
export function rejectedFilePath(input: string): string {
  const extension = extname(input);
  return join(dirname(input), `${basename(input, extension)}.rejected${extension}`);
}

/**
 * The records that were not applied, in the input's own format, each with its reason (`_error`) and
 * where it stood in the input (`_line`, or `_index` for a JSON array), so that a person can fix them
 * and run the same command on this file. Created with the first rejection; a stale one is removed.
 */
export class RejectedFile {
  private stream: WriteStream | undefined;
  private count = 0;
  private readonly dataColumns: number[];

  constructor(
    readonly path: string,
    private readonly format: Format,
    private readonly headers: string[] = [],
  ) {
    rmSync(path, { force: true });
    this.dataColumns = headers.flatMap((header, column) => (header.startsWith("_") ? [] : [column]));
  }

  get rejected(): number {
    return this.count;
  }

  /** `text` is the record as JSON, for a record that is no longer held parsed. */
  add(source: SourceRecord, error: string, text?: string): void {
    const stream = (this.stream ??= this.open());
    if (this.format === "csv") {
      const cells = source.cells ? this.dataColumns.map((column) => source.cells![column] ?? "") : this.dataColumns.map(() => "");
      stream.write(stringify([[...cells, error, String(source.line ?? "")]]));
    } else {
      const where = this.format === "json" ? { _index: source.index } : { _line: source.line };
      const record = source.record ?? (text === undefined ? {} : JSON.parse(text));
      const line = JSON.stringify({ ...record, _error: error, ...where });
      stream.write(this.format === "json" ? `${this.count === 0 ? "" : ",\n"}${line}` : `${line}\n`);
    }
    this.count++;
  }

  async close(): Promise<void> {
    if (!this.stream) return;
    if (this.format === "json") this.stream.write("\n]\n");
    await new Promise<void>((resolve, reject) => this.stream!.end((error?: Error | null) => (error ? reject(error) : resolve())));
  }

  private open(): WriteStream {
    const stream = createWriteStream(this.path);
    if (this.format === "csv") stream.write(stringify([[...this.dataColumns.map((column) => this.headers[column]!), "_error", "_line"]]));
    if (this.format === "json") stream.write("[\n");
    return stream;
  }
}
