import { shellWord, SourceError } from "./text";

/**
 * How a CSV file is written (its delimiter and line ending), and a check of its structure before anything is
 * sent: quotes that open and close where a CSV reader expects them, and one kind of line ending throughout.
 * A spreadsheet saved in a European locale uses `;`, a tab-separated export uses tabs; a file put together from
 * two sources can mix CRLF and LF, which a reader that took the first line's ending would merge into one row.
 * These are found here, with the line, instead of as rows rejected for reasons that hide the cause.
 */

export const delimiters = [",", ";", "\t"] as const;
export type LineEnding = "\r\n" | "\n" | "\r";

/** How csv-rows reads a file's rows: what the survey found (or --delimiter said). */
export type CsvRowOptions = { delimiter: string; lineEnding: LineEnding | undefined };
/** csv-parse's options for those, the same for both its builds (csv-rows.ts, csv-rows.browser.ts). */
export const csvParseOptions = ({ delimiter, lineEnding }: CsvRowOptions) => ({ info: true, delimiter, record_delimiter: lineEnding ?? [], relax_column_count: true, skip_empty_lines: true });
/** A row's cells as written, and the line it ends on (a quoted cell may span lines): csv-parse's own shape. */
export type CsvRow = { record: string[]; info: { lines: number } };
/** csv-parse's errors, from either of its builds: a code such as CSV_QUOTE_NOT_CLOSED, and the line. */
export function isCsvSyntaxError(error: unknown): error is Error & { code: string; lines?: number } {
  const code = (error as { code?: unknown } | null)?.code;
  return error instanceof Error && typeof code === "string" && code.startsWith("CSV_");
}

const names: Record<string, string> = { ",": "','", ";": "';'", "\t": "tab", "|": "'|'" };
export const delimiterName = (delimiter: string) => names[delimiter] ?? `'${delimiter}'`;
/** A command that gives a file LF line endings throughout: dos2unix leaves a CR alone as it is, mac2unix turns it into LF. */
const lineEndingFix = (path: string, endings: LineEnding[]) =>
  endings.includes("\r") ? `dos2unix ${shellWord(path)} && mac2unix ${shellWord(path)}` : `dos2unix ${shellWord(path)}`;
const endingNames: Record<LineEnding, string> = { "\r\n": "CRLF (\\r\\n, Windows)", "\n": "LF (\\n)", "\r": "CR (\\r) alone" };

/** `--delimiter`'s value: a character, or `tab`. */
export function parseDelimiter(value: string): string {
  if (value === "tab" || value === "\\t" || value === "\t") return "\t";
  if ([...value].length !== 1 || /["\r\n]/.test(value)) throw new SourceError(`--delimiter must be one character (such as ',' or ';') or 'tab', not ${JSON.stringify(value)}`);
  return value;
}

/** The file's first record (its header row): the text up to the first line end outside quotes, or undefined if `text` holds none. */
export function firstRecord(text: string): string | undefined {
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (char === '"') quoted = !quoted;
    else if (!quoted && (char === "\n" || char === "\r")) return text.slice(0, i);
  }
  return undefined;
}

/** A record's cells: split at `delimiter` outside quotes, quotes removed, a doubled quote read as one. */
export function splitRecord(record: string, delimiter: string): string[] {
  const cells: string[] = [];
  let cell = "";
  let quoted = false;
  for (let i = 0; i < record.length; i++) {
    const char = record[i]!;
    if (quoted) {
      if (char !== '"') cell += char;
      else if (record[i + 1] === '"') (cell += '"'), i++;
      else quoted = false;
    } else if (char === '"') quoted = true;
    else if (char === delimiter) cells.push(cell), (cell = "");
    else cell += char;
  }
  cells.push(cell);
  return cells;
}

/**
 * The delimiter of a header row: the one of `,`, `;` and tab whose cells name the most fields (`isField`).
 * Undefined when none names any (then the header is not one, or the delimiter is another) or when two name as
 * many: --delimiter decides then.
 */
export function detectDelimiter(header: string, isField: (cell: string) => boolean): { delimiter?: string; tied: string[] } {
  const scored = delimiters
    .map((delimiter) => ({ delimiter, score: splitRecord(header, delimiter).filter((cell) => isField(cell.trim())).length }))
    .sort((a, b) => b.score - a.score);
  const best = scored[0]!;
  if (best.score === 0) return { tied: [] };
  const tied = scored.filter((candidate) => candidate.score === best.score).map((candidate) => candidate.delimiter);
  return tied.length > 1 ? { tied } : { delimiter: best.delimiter, tied };
}

const QUOTE = 0x22;
const LF = 0x0a;
const CR = 0x0d;

const enum State {
  FieldStart,
  Unquoted,
  Quoted,
  /** A quote inside a quoted cell: doubled (one quote of the text) or the cell's end. */
  QuoteInQuoted,
  /** A CR outside quotes: a CRLF's first half, or a line ending of its own. */
  AfterCr,
}

/**
 * Reads CSV text as it streams and checks its structure, as csv-parse will read it: quotes only at a cell's
 * start, a quoted cell closed before its delimiter or line end, one kind of line ending outside quotes (any
 * inside a quoted cell is its text). Counts the records (lines with anything on them), so that the import
 * knows its total before it starts. Throws a SourceError naming the line.
 */
export class CsvStructure {
  /** Records seen, the header included. */
  records = 0;
  /** The line ending of the first record, and of every other. */
  lineEnding: LineEnding | undefined;
  private state = State.FieldStart;
  private line = 1;
  private quoteLine = 1;
  private recordHasText = false;
  private readonly delimiter: number;

  constructor(
    private readonly path: string,
    delimiter: string,
  ) {
    this.delimiter = delimiter.charCodeAt(0);
  }

  /**
   * Jumps from one character that matters to the next (a quote, a line end) with indexOf, which is several times
   * faster than looking at every character: 200 MB in about 0.3 s.
   */
  scan(text: string): void {
    const delimiter = this.delimiter;
    let [nextQuote, nextLf, nextCr] = [-2, -2, -2];
    const after = (from: number, char: string, cached: number) => (cached >= from || cached === -1 ? cached : text.indexOf(char, from));
    let i = 0;
    while (i < text.length) {
      switch (this.state) {
        case State.Quoted: {
          nextQuote = after(i, '"', nextQuote);
          const end = nextQuote === -1 ? text.length : nextQuote;
          for (let at = text.indexOf("\n", i); at !== -1 && at < end; at = text.indexOf("\n", at + 1)) this.line++;
          if (nextQuote === -1) return;
          this.state = State.QuoteInQuoted;
          i = nextQuote + 1;
          continue;
        }
        case State.QuoteInQuoted: {
          const c = text.charCodeAt(i);
          if (c === QUOTE) {
            this.state = State.Quoted;
            i++;
            continue;
          }
          if (c !== delimiter && c !== LF && c !== CR) {
            throw new SourceError(
              `${this.path} line ${this.line}: a quoted cell goes on after its closing quote. Inside a quoted cell, write a quote twice (""), as spreadsheet programs do.`,
            );
          }
          this.state = State.Unquoted; // the delimiter or line end is read below
          break;
        }
        case State.AfterCr:
          this.state = State.FieldStart;
          if (text.charCodeAt(i) === LF) {
            this.endRecord("\r\n");
            i++;
            continue;
          }
          this.endRecord("\r"); // and this character starts the next record
          break;
      }
      // Outside quotes: the text up to the next quote or line end is cells and delimiters.
      nextQuote = after(i, '"', nextQuote);
      nextLf = after(i, "\n", nextLf);
      nextCr = after(i, "\r", nextCr);
      let stop = text.length;
      if (nextQuote !== -1 && nextQuote < stop) stop = nextQuote;
      if (nextLf !== -1 && nextLf < stop) stop = nextLf;
      if (nextCr !== -1 && nextCr < stop) stop = nextCr;
      if (stop > i) {
        this.recordHasText = true;
        this.state = text.charCodeAt(stop - 1) === delimiter ? State.FieldStart : State.Unquoted;
      }
      if (stop === text.length) return;
      const c = text.charCodeAt(stop);
      i = stop + 1;
      if (c === LF) {
        this.endRecord("\n");
        this.state = State.FieldStart;
      } else if (c === CR) {
        this.state = State.AfterCr;
      } else if (this.state === State.FieldStart) {
        this.recordHasText = true;
        this.quoteLine = this.line;
        this.state = State.Quoted;
      } else {
        throw this.strayQuote();
      }
    }
  }

  /** The end of the file: a quoted cell still open is an error; a last line without a line end is a record. */
  end(): void {
    if (this.state === State.Quoted) {
      throw new SourceError(
        `${this.path} line ${this.quoteLine}: a quoted cell starts here and is never closed, so the rest of the file would be read as this one cell. Close its quote, or write a quote inside it twice ("").`,
      );
    }
    if (this.state === State.AfterCr) this.endRecord("\r");
    else if (this.recordHasText) this.records++;
  }

  private strayQuote(): SourceError {
    return new SourceError(
      `${this.path} line ${this.line}: a cell holds a quote (") but does not start with one. Put the whole cell in quotes and write the quote inside it twice ("12"" pipe"), as spreadsheet programs do.`,
    );
  }

  private endRecord(ending: LineEnding): void {
    if (this.recordHasText) {
      this.records++;
      if (this.lineEnding === undefined) this.lineEnding = ending;
      else if (ending !== this.lineEnding) {
        throw new SourceError(
          `${this.path} line ${this.line} ends with ${endingNames[ending]}, but line 1 (the header) ends with ${endingNames[this.lineEnding]}: the file mixes line endings ` +
            `(was it put together from two files?). Save it with one kind, for example with ${lineEndingFix(this.path, [ending, this.lineEnding])}, and import it again.`,
        );
      }
    }
    this.recordHasText = false;
    this.line++;
  }
}
