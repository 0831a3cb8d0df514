import { createWriteStream, existsSync, readFileSync, rmSync, writeFileSync, type WriteStream } from "node:fs";
import { basename, dirname, join } from "node:path";
import { rejectedFileName, RejectedRows } from "./rejected-rows";
import type { CsvDialect, Format, SourceRecord } from "./source";

/** `data/assets.csv` → `data/assets.rejected.csv`; the `n`th choice `data/assets.rejected-2.csv`. */
export function rejectedFilePath(input: string, n = 1): string {
  return join(dirname(input), rejectedFileName(basename(input), { n }));
}

/**
 * Beside each rejected file, a hidden note of what importd wrote into it (`.assets.rejected.csv.importd`: its
 * SHA-256), so that a later run can tell the file it may replace from one the user has been fixing.
 */
const notePath = (path: string) => join(dirname(path), `.${basename(path)}.importd`);

const sha256 = (bytes: Uint8Array | string) => new Bun.CryptoHasher("sha256").update(bytes).digest("hex");

/** importd wrote `path` and nobody has changed it since. */
function unchangedSinceWritten(path: string): boolean {
  try {
    const { sha256: written } = JSON.parse(readFileSync(notePath(path), "utf8")) as { sha256?: string };
    return written === sha256(readFileSync(path));
  } catch {
    return false;
  }
}

/**
 * The rejected file of an import (see RejectedRows for what it holds), created with the first rejection. A rejected
 * file of an earlier run is replaced only if nobody changed it since importd wrote it: the user's edits are never lost
 * (DECISIONS 12); this run's rejections then go to `…rejected-2.csv` (or the next free name), and `kept` names the
 * file left alone.
 */
export class RejectedFile {
  private stream: WriteStream | undefined;
  private readonly hash = new Bun.CryptoHasher("sha256");
  private readonly rows: RejectedRows;

  private constructor(
    readonly path: string,
    /** Rejected files of earlier runs that were changed since, left as they are. */
    readonly kept: string[],
    format: Format,
    csv: CsvDialect | undefined,
  ) {
    this.rows = new RejectedRows(format, csv);
  }

  /** The rejected file of `input`: its usual name, unless a changed file holds it. An unchanged one is removed. */
  static for(input: string, format: Format, csv?: CsvDialect): RejectedFile {
    const kept: string[] = [];
    for (let n = 1; ; n++) {
      const path = rejectedFilePath(input, n);
      if (existsSync(path) && !unchangedSinceWritten(path)) {
        kept.push(path);
        continue;
      }
      rmSync(path, { force: true });
      rmSync(notePath(path), { force: true });
      return new RejectedFile(path, kept, format, csv);
    }
  }

  get rejected(): number {
    return this.rows.count;
  }

  /** `text` is the record as JSON, for a record that is no longer held parsed. */
  add(source: SourceRecord, error: string, text?: string): void {
    this.write(this.rows.add(source, error, text));
  }

  async close(): Promise<void> {
    if (!this.stream) return;
    this.write(this.rows.end());
    await new Promise<void>((resolve, reject) => this.stream!.end((error?: Error | null) => (error ? reject(error) : resolve())));
    writeFileSync(notePath(this.path), `${JSON.stringify({ sha256: this.hash.digest("hex") })}\n`);
  }

  private write(text: string): void {
    this.stream ??= createWriteStream(this.path);
    this.hash.update(text);
    this.stream.write(text);
  }
}
