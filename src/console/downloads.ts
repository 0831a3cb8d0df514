import type { ImportdClient, RejectedRecord, Resource } from "../client";
import { RejectedColumns } from "../importer/rejected-csv";

/**
 * Saves a job's rejected records as the CSV `importd jobs rejected` writes (the same columns: every field the records
 * have, nested ones dotted, then `_error` and `_index`), to be fixed and imported again.
 */
export async function downloadRejectedCsv(client: ImportdClient, id: number): Promise<void> {
  const columns = new RejectedColumns();
  const records: RejectedRecord[] = [];
  for await (const record of client.rejectedRecords(id)) {
    columns.add(record);
    records.push(record);
  }
  const lines = [columns.header, ...records.map((record) => columns.row(record))];
  saveFile(new Blob([lines.join("\n") + "\n"], { type: "text/csv;charset=utf-8" }), `job-${id}-rejected.csv`);
}

/**
 * Saves every record of a resource as `importd export` writes them (GET /v2/exports/<resource>, one snapshot, in id
 * order): CSV that `importd import` reads back, or NDJSON. The page has the key, not the browser's download manager,
 * so the answer is gathered here and then handed over as a file.
 */
export async function downloadExport(client: ImportdClient, resource: string, format: "csv" | "ndjson"): Promise<void> {
  const response = await client.exportRecords(resource as Resource, { format });
  const blob = await response.blob();
  saveFile(new Blob([blob], { type: format === "csv" ? "text/csv;charset=utf-8" : "application/x-ndjson" }), `${resource}.${format}`);
}

/** Hands a Blob to the browser as a download named `name`. */
export function saveFile(blob: Blob, name: string): void {
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}
