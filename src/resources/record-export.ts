// The two forms an export writes a resource's records in (DECISIONS 14): NDJSON, one line per record as
// GET /v2/<resource>/{id} gives it, and CSV in the importer's own column layout (record-csv.ts).
import type { ResourceDefinition } from "./definition";
import { RecordCsv } from "./record-csv";

export type ExportFormat = "ndjson" | "csv";

/** A resource's records as an export file's text: what the file starts with, then each slice of records. */
export type RecordEncoding = {
  /** CSV's header row; nothing for NDJSON. */
  head: string;
  encode(records: Array<Record<string, unknown>>): string;
};

export function recordEncoding(resource: ResourceDefinition, format: ExportFormat): RecordEncoding {
  if (format === "csv") {
    const csv = new RecordCsv(resource);
    return {
      head: csv.header,
      encode: (records) => {
        let text = "";
        for (const record of records) text += csv.line(record);
        return text;
      },
    };
  }
  return {
    head: "",
    encode: (records) => {
      let text = "";
      for (const record of records) text += `${JSON.stringify(record)}\n`;
      return text;
    },
  };
}
