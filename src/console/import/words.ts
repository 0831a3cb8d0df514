/** The importer's messages name the CLI's flags; the console has a control for each. */
export function inConsoleWords(message: string): string {
  return message
    .replaceAll("pass --ignore-unknown-columns to import the file without", 'tick "Ignore unknown columns" to import the file without')
    .replaceAll("--ignore-unknown-columns", '"Ignore unknown columns"')
    .replace(/[Pp]ass --delimiter \(',', ';' or tab\)/g, "Choose the delimiter")
    .replace(/pass --delimiter (tab|'.')/g, (_, delimiter: string) => `choose ${delimiter === "tab" ? "tab" : delimiter} as the delimiter`)
    .replaceAll("leave --delimiter out", 'choose "Detect" as the delimiter')
    .replace(/[Pp]ass --format csv, ndjson or json/g, "choose the format")
    .replace(/pass --format (csv|ndjson|json)\b/g, (_, format: string) => `choose ${format === "csv" ? "CSV" : format === "json" ? "JSON" : "NDJSON"} as the format`)
    .replace(/[Pp]ass --format if it is another kind/g, "Choose the format if it is another kind")
    .replaceAll("choose another --resource", "choose another resource");
}
