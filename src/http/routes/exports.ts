import { Elysia, t, type AnyElysia } from "elysia";
import type { ResourceDefinition } from "../../resources/definition";
import { resources } from "../../resources/registry";
import type { RecordExport } from "../../worker/exports";
import { authentication } from "../auth";
import { environmentParameter, problemResponses, resourceOperationIds } from "../openapi";
import { youSent } from "../paging";
import { environmentBusy, serverBusy, validationProblem } from "../problem";
import { resourceSchemas } from "../schemas";
import type { Services } from "../services";

// Exports (DECISIONS 14): every record of a resource, from one snapshot, in id order, streamed a chunk at a time as
// the export's thread reads and writes them (worker/exports.ts).

/**
 * Exports at a time, in this process and per environment. Each holds a snapshot (on PostgreSQL a connection of its
 * own, outside the pool the other reads take turns on); one environment cannot take them all (DECISIONS 15).
 */
const maxExports = 4;
const maxExportsPerEnvironment = 2;

// A date, or a date and time with its offset: a time without one would be read in the server's time zone.
const timestampFormat = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/i;

/** `?updatedSince=` as the store compares it (toISOString's form); a 400 keyed updatedSince when it is not a timestamp. */
function updatedSinceOf(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  const time = timestampFormat.test(text) ? Date.parse(text.toUpperCase()) : Number.NaN;
  if (Number.isNaN(time)) {
    throw validationProblem({
      updatedSince: [`'Updated Since' must be an ISO 8601 timestamp with its time zone, such as 2026-11-27T10:00:00Z (or a date, 2026-11-27, for its start in UTC). ${youSent(text)}`],
    });
  }
  return new Date(time).toISOString();
}

/**
 * A client that takes nothing for this long loses its export: its snapshot holds the SQLite WAL (or a PostgreSQL
 * connection) while it waits, and Bun does not close a connection whose answer is stuck in its send buffer (a
 * stalled socket stayed open past 320 s). One that reads, however slowly, keeps it.
 */
const stalledExportMs = 120_000;

/** Why an export was ended before its last record: its client stopped taking it. */
class ExportStalled extends Error {}

/**
 * The export as a byte stream, a chunk per pull: only what the client has taken is read (the stream's backpressure).
 * The export is closed at the end, when the client goes away, or on a fault (the body is then cut short: a client sees
 * it unfinished).
 */
function recordStream(records: RecordExport, stallMs: number, onEnd: (error?: unknown) => void): ReadableStream<Uint8Array> {
  let ended = false;
  let stall: ReturnType<typeof setTimeout> | undefined;
  const end = async (error?: unknown) => {
    if (ended) return;
    ended = true;
    clearTimeout(stall);
    await records.close();
    onEnd(error);
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      clearTimeout(stall);
      // Until the next pull: the client has not taken this chunk yet.
      const enqueue = (chunk: Uint8Array) => {
        controller.enqueue(chunk);
        stall = setTimeout(() => {
          const stalled = new ExportStalled(`its client took nothing for ${stallMs / 1000} s`);
          void end(stalled);
          controller.error(stalled);
        }, stallMs);
      };
      try {
        const chunk = await records.next();
        if (ended) return;
        if (chunk !== undefined) return enqueue(chunk);
        await end();
        controller.close();
      } catch (error) {
        // Gone meanwhile (the client left): nothing is owed to a canceled stream.
        if (ended) return;
        await end(error);
        controller.error(error);
      }
    },
    cancel: () => end(),
  });
}

/** Tests' hook (TestHooks.exportHold): the export's first chunk goes out, the next is not asked for until `held` settles. */
function heldAfterFirstChunk(records: RecordExport, held: Promise<void>): RecordExport {
  let chunks = 0;
  return {
    next: async () => {
      if (chunks++ > 0) await held;
      return records.next();
    },
    close: () => records.close(),
  };
}

function exportRoute(services: Services, resource: ResourceDefinition, inFlight: { all: number; byEnvironment: Map<number, number> }) {
  return new Elysia().use(authentication(services)).get(
    `/exports/${resource.path}`,
    async ({ query, request, environmentId }) => {
      const updatedSince = updatedSinceOf(query.updatedSince);
      const asCsv = /\btext\/csv\b/i.test(request.headers.get("accept") ?? "");
      const ofEnvironment = inFlight.byEnvironment.get(environmentId) ?? 0;
      if (ofEnvironment >= maxExportsPerEnvironment) {
        throw environmentBusy(`This environment has ${maxExportsPerEnvironment} exports running, as many as it may at once. Start this one when one of them has ended (after Retry-After seconds).`);
      }
      if (inFlight.all >= maxExports) throw serverBusy(`The server is running ${maxExports} exports, as many as it may at once. Start this one after Retry-After seconds.`);
      inFlight.all++;
      inFlight.byEnvironment.set(environmentId, ofEnvironment + 1);
      const release = () => {
        inFlight.all--;
        const left = (inFlight.byEnvironment.get(environmentId) ?? 1) - 1;
        if (left === 0) inFlight.byEnvironment.delete(environmentId);
        else inFlight.byEnvironment.set(environmentId, left);
      };
      let records: RecordExport;
      try {
        records = await services.exports.open(resource, environmentId, { updatedSince, format: asCsv ? "csv" : "ndjson" });
      } catch (error) {
        release();
        throw error;
      }
      const stallMs = services.config.testHooks?.exportStallMs ?? stalledExportMs;
      const held = services.config.testHooks?.exportHold?.();
      const body = recordStream(held ? heldAfterFirstChunk(records, held) : records, stallMs, (error) => {
        release();
        if (error instanceof ExportStalled) services.log({ level: "warn", msg: "export ended: its client stopped reading", resource: resource.path, environmentId, why: error.message });
        else if (error) services.log({ level: "error", msg: "export cut short", resource: resource.path, environmentId, error: String((error as Error)?.stack ?? error) });
      });
      const extension = asCsv ? "csv" : "ndjson";
      return new Response(body, {
        headers: {
          "content-type": asCsv ? "text/csv; charset=utf-8" : "application/x-ndjson",
          "content-disposition": `attachment; filename="${resource.path}.${extension}"`,
          "cache-control": "no-store",
        },
      });
    },
    {
      params: t.Object({ env: environmentParameter }),
      query: t.Object({ updatedSince: t.Optional(t.String()) }),
      detail: {
        operationId: `export${resourceOperationIds(resource.jobType).listRecords.slice("list".length)}`,
        summary: `Export every ${resource.noun} record`,
        description:
          `Every ${resource.noun} of the environment, in the order of their ids, from one snapshot: what was committed when the request arrived, ` +
          `nothing that a job writes while the export streams. Streamed as it is read, whatever the number of records. ` +
          `NDJSON by default: one line per record, as GET /v2/${resource.path}/{id} gives it (with updatedAt and lastJobId). ` +
          `With \`Accept: text/csv\`, CSV in the layout \`importd import\` reads: a header row with a column per field (dotted for nested ones, ` +
          `such as geolocation.locationStart), then updatedAt and lastJobId; an absent field is an empty cell, and a cell that a spreadsheet would run as a ` +
          `formula (it starts with =, +, -, @, a tab or a carriage return) or that starts with a quote gets a quote before it, which importd import takes off again. ` +
          `Either file imported again leaves every record unchanged. ` +
          `With ?updatedSince=, only the records written at or after that time. At most ${maxExportsPerEnvironment} exports of an environment run at once ` +
          `(a third is 429), and ${maxExports} of the server's (503); one whose client takes nothing for ${stalledExportMs / 1000} s is ended. A body cut short (no last line end, the connection closed) met a fault: ask again.`,
        tags: ["Records"],
        parameters: [
          {
            name: "updatedSince",
            in: "query",
            required: false,
            schema: { type: "string", format: "date-time" },
            description: "Only the records written (created or changed) at or after this time: an ISO 8601 timestamp with its time zone, such as 2026-11-27T10:00:00Z.",
          },
          {
            name: "Accept",
            in: "header",
            required: false,
            schema: { type: "string", enum: ["application/x-ndjson", "text/csv"], default: "application/x-ndjson" },
            description: "text/csv for CSV; NDJSON otherwise.",
          },
        ],
        responses: {
          200: {
            description: `The ${resource.noun} records, in id order.`,
            headers: {
              "Content-Disposition": { schema: { type: "string" }, description: `attachment, with a file name (${resource.path}.ndjson or ${resource.path}.csv).` },
              "Cache-Control": { schema: { type: "string" }, description: "no-store: the records as they are now." },
            },
            content: {
              "application/x-ndjson": { schema: resourceSchemas(resource).stored as never },
              "text/csv": { schema: { type: "string" } },
            },
          },
          ...problemResponses(400, 401, 429, 503),
        },
      },
    },
  );
}

// Typed as any Elysia app, as the deletions' are: the routes' types differ by resource, and nothing reads them.
export function exportRoutes(services: Services): AnyElysia {
  const inFlight = { all: 0, byEnvironment: new Map<number, number>() };
  return resources.reduce<AnyElysia>((app, resource) => app.use(exportRoute(services, resource, inFlight)), new Elysia());
}
