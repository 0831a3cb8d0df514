import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync as readText, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { importAndWait, postJson, waitForJob } from "../helpers/api";
import { importd } from "../helpers/process";
import { asset, assets, seedReferenceData } from "../helpers/records";
import { connect } from "node:net";
import { connect as connectTls } from "node:tls";
import { readFileSync } from "node:fs";
import { notOverHttps, testTls } from "../helpers/backend";
import { startTestServer, tempDir, type TestServer } from "../helpers/server";
import { until } from "../helpers/until";

// GET /{env}/v2/exports/<resource> (DECISIONS 14), through the real server: every record from one snapshot, in id order,
// as NDJSON or as CSV in the importer's own layout, and imported again unchanged.

let server: TestServer;
const dir = tempDir("importd-export-");
/** What the next exports to begin wait for after their first chunk (TestHooks.exportHold); those after them, nothing. */
const holds: Array<Promise<void>> = [];
beforeAll(async () => {
  server = await startTestServer({ testHooks: { exportHold: () => holds.shift() } });
  await seedReferenceData(server.base, server.key);
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const exportOf = (resource: string, { query = "", accept, base = server.base, key = server.key }: { query?: string; accept?: string; base?: string; key?: string } = {}) =>
  fetch(`${base}/v2/exports/${resource}${query}`, { headers: { "api-key": key, ...(accept ? { accept } : {}) } });
const lines = (text: string) => text.split("\n").filter((line) => line !== "");
const ndjson = async (response: Response) => lines(await response.text()).map((line) => JSON.parse(line) as Record<string, unknown>);
const read = async (resource: string, id: string, base: string, key: string) => (await fetch(`${base}/v2/${resource}/${encodeURIComponent(id)}`, { headers: { "api-key": key } })).json();

/**
 * Holds the next `count` exports to begin, each after its first chunk, until the function this returns lets them go on:
 * the test, not the sockets' buffers, keeps them mid-way.
 */
function holdExports(count: number): () => void {
  let release = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  holds.push(...Array.from({ length: count }, () => held));
  return () => {
    holds.splice(0);
    release();
  };
}

/**
 * An export on a socket that stops reading after the first bytes, as a slow client's does: the server's writes back
 * up, and its export waits, mid-way, until `rest()` reads on (to the end: Connection: close).
 */
async function pausedExport(base: string, key: string, path = "assets") {
  const url = new URL(`${base}/v2/exports/${path}`);
  const chunks: Buffer[] = [];
  let ended: () => void = () => {};
  const closed = new Promise<void>((resolve) => (ended = resolve));
  let headed: (head: { status: number }) => void = () => {};
  const head = new Promise<{ status: number }>((resolve) => (headed = resolve));
  const request = `GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nApi-Key: ${key}\r\nConnection: close\r\n\r\n`;
  const socket = await new Promise<ReturnType<typeof connect>>((resolve, reject) => {
    const opened = testTls
      ? connectTls({ port: Number(url.port), host: "127.0.0.1", ca: readFileSync(testTls.ca) }, () => resolve(opened))
      : connect(Number(url.port), "127.0.0.1", () => resolve(opened));
    opened.once("error", reject);
  });
  socket.on("error", () => {});
  socket.on("data", (chunk: Buffer) => {
    if (chunks.length === 0) {
      socket.pause();
      headed({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(chunk.toString("latin1"))?.[1] ?? 0) });
    }
    chunks.push(chunk);
  });
  socket.on("close", () => ended());
  socket.write(request);
  /** The rest of the answer, read to the end: its body, the chunked encoding taken off, and whether it ended as HTTP ends one. */
  const read = async (): Promise<{ body: string; complete: boolean }> => {
    socket.resume();
    await closed;
    const raw = Buffer.concat(chunks);
    let at = raw.indexOf("\r\n\r\n") + 4;
    const body: Buffer[] = [];
    for (;;) {
      const lineEnd = raw.indexOf("\r\n", at);
      const size = lineEnd === -1 ? Number.NaN : Number.parseInt(raw.subarray(at, lineEnd).toString("latin1"), 16);
      // The last, empty chunk; or none, the connection closed mid-answer.
      if (!(size > 0)) return { body: Buffer.concat(body).toString("utf8"), complete: size === 0 };
      body.push(raw.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
  };
  return {
    head,
    rest: async () => (await read()).body,
    complete: async () => (await read()).complete,
    close: () => void socket.destroy(),
  };
}

describe("GET /{env}/v2/exports/<resource>", () => {
  test("streams every record as NDJSON, in id order, each line the record as GET /v2/<resource>/{id} gives it", async () => {
    const { base, key } = await server.addEnvironment("ndjson");
    await seedReferenceData(base, key);
    // Imported out of order, over two jobs.
    await importAndWait(base, "assets", key, [asset(3), asset(1, { description: undefined, geolocation: undefined }), asset(2)]);
    await importAndWait(base, "assets", key, [asset(0, { startPoint: 0 })]);
    const response = await exportOf("assets", { base, key });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/x-ndjson");
    expect(response.headers.get("content-disposition")).toBe('attachment; filename="assets.ndjson"');
    const records = await ndjson(response);
    expect(records.map((record) => record.id)).toEqual([asset(0).id, asset(1).id, asset(2).id, asset(3).id]);
    for (const record of records) {
      const one = await fetch(`${base}/v2/assets/${record.id}`, { headers: { "api-key": key } });
      expect(record).toEqual(await one.json());
    }
    expect(records[1]).not.toHaveProperty("geolocation");
  });

  notOverHttps("with Accept: text/csv, CSV in the importer's own layout: a column per field, dotted for nested ones, then updatedAt and lastJobId", async () => {
    const { base, key } = await server.addEnvironment("csv");
    await seedReferenceData(base, key);
    const job = await importAndWait(base, "assets", key, [asset(1, { description: "=HYPERLINK(\"x\")", name: 'Main, "old"\nline two', geolocation: undefined }), asset(2, { description: "'quoted" })]);
    const response = await exportOf("assets", { base, key, accept: "text/csv" });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/csv; charset=utf-8");
    const text = await response.text();
    const [header, first] = text.split("\r\n");
    expect(header).toBe(
      "id,subAreaId,name,description,status,assetCategoryId,assetTypeId,shapeType,startPoint,endPoint,geolocation.linearReferenceStart,geolocation.linearReferenceEnd," +
        "geolocation.locationStart,geolocation.locationEnd,geolocation.locationUnit,updatedAt,lastJobId",
    );
    const stored = (await read("assets", asset(1).id, base, key)) as { updatedAt: string };
    // A formula is neutralized with a quote; a cell with a comma, a quote or a line break is quoted; an absent field is empty.
    expect(first).toBe(`${asset(1).id},south,"Main, ""old""\nline two","'=HYPERLINK(""x"")",ACT,water,pipe,LineString,1,11.5,,,,,,${stored.updatedAt},${job.id}`);
    expect(text).toContain(",''quoted,");
    expect(text.endsWith("\r\n")).toBe(true);
  });

  notOverHttps("?updatedSince= exports only the records written at or after it", async () => {
    const { base, key } = await server.addEnvironment("since");
    await seedReferenceData(base, key);
    await importAndWait(base, "assets", key, assets(3));
    const { updatedAt } = (await read("assets", asset(0).id, base, key)) as { updatedAt: string };
    await Bun.sleep(5);
    const since = new Date().toISOString();
    await importAndWait(base, "assets", key, [asset(1, { name: "Changed" }), asset(7)]);
    expect((await ndjson(await exportOf("assets", { base, key, query: `?updatedSince=${since}` }))).map((record) => record.id)).toEqual([asset(1).id, asset(7).id]);
    // At or after: the exact time of a write includes it.
    expect((await ndjson(await exportOf("assets", { base, key, query: `?updatedSince=${encodeURIComponent(updatedAt)}` }))).map((record) => record.id)).toHaveLength(4);
    // An offset is a time zone: the same moment.
    const shifted = new Date(Date.parse(since) + 2 * 3_600_000).toISOString().replace("Z", "+02:00");
    expect(await ndjson(await exportOf("assets", { base, key, query: `?updatedSince=${encodeURIComponent(shifted)}` }))).toHaveLength(2);
    expect(await ndjson(await exportOf("assets", { base, key, query: "?updatedSince=2999-01-01" }))).toEqual([]);
  });

  notOverHttps("a bad updatedSince is a 400 naming it", async () => {
    for (const bad of ["yesterday", "2026-13-45T00:00:00Z", "2026-11-27T10:00:00", ""]) {
      const response = await exportOf("assets", { query: `?updatedSince=${encodeURIComponent(bad)}` });
      expect(response.status).toBe(400);
      const problem = (await response.json()) as { errors: Record<string, string[]> };
      expect(problem.errors.updatedSince![0]).toStartWith("'Updated Since' must be an ISO 8601 timestamp with its time zone, such as 2026-11-27T10:00:00Z");
    }
  });

  notOverHttps("needs a key of the environment, and an unknown resource is a 404", async () => {
    expect((await exportOf("assets", { key: "wrong" })).status).toBe(401);
    expect((await fetch(`${server.base}/v2/exports/assets`)).status).toBe(401);
    expect((await exportOf("pipes")).status).toBe(404);
  });

  notOverHttps("an empty resource is an empty body (CSV: its header alone)", async () => {
    const { base, key } = await server.addEnvironment("empty");
    expect(await (await exportOf("subareas", { base, key })).text()).toBe("");
    expect(await (await exportOf("subareas", { base, key, accept: "text/csv" })).text()).toBe("id,name,description,updatedAt,lastJobId\r\n");
  });

  notOverHttps("is one snapshot: what jobs commit while the export streams is not seen, not even in part", async () => {
    const { base, key } = await server.addEnvironment("snapshot");
    await seedReferenceData(base, key);
    // More than a slice (1,000 records, worker/exports.ts): the exports below send the first and are held there.
    const count = 1_500;
    await importAndWait(base, "assets", key, assets(count));
    const release = holdExports(2);
    try {
      const exports = [await exportOf("assets", { base, key }), await exportOf("assets", { base, key })];
      for (const held of exports) expect(held.status).toBe(200);
      // Every record changed, one deleted and one created, all committed before the rest is read.
      const job = await importAndWait(base, "assets", key, [...Array.from({ length: count }, (_, i) => asset(i, { name: "Changed" })), asset(count + 1)]);
      expect(job.importJobStatus).toBe("Succeeded");
      const deletion = await waitForJob(base, key, ((await (await postJson(base, "deletions/assets", key, [asset(count - 1).id])).json()) as { id: number }).id);
      expect(deletion.importJobStatus).toBe("Succeeded");
      // Both exports are still streaming (an environment runs two at once: a third is refused)...
      const third = await exportOf("assets", { base, key });
      expect(third.status).toBe(429);
      expect(third.headers.get("retry-after")).toBe("5");
      await third.text();
      // ...and let go on, they show the records as they were when they began.
      release();
      for (const held of exports) {
        const records = (await ndjson(held)) as Array<{ id: string; name: string }>;
        expect(records).toHaveLength(count);
        expect(records.filter((record) => record.name === "Changed")).toEqual([]);
        expect(records.map((record) => record.id)).toEqual(Array.from({ length: count }, (_, i) => asset(i).id));
      }
    } finally {
      release();
    }
    // The next export sees the changes.
    const after = await ndjson(await exportOf("assets", { base, key }));
    expect(after).toHaveLength(count);
    expect(after.slice(0, -1).every((record) => record.name === "Changed")).toBe(true);
    expect(after.at(-1)!.id).toBe(asset(count + 1).id);
  }, 60_000);

  test("a client that goes away mid-export ends it, and lets go of its snapshot", async () => {
    const { base, key } = await server.addEnvironment("abandon");
    await seedReferenceData(base, key);
    // More than a slice (1,000 records): each export is held after its first, mid-way, when its client goes.
    await importAndWait(base, "assets", key, assets(1_500));
    for (let round = 0; round < 3; round++) {
      const release = holdExports(2);
      try {
        const held = [await pausedExport(base, key), await pausedExport(base, key)];
        for (const one of held) expect((await one.head).status).toBe(200);
        expect((await exportOf("assets", { base, key })).status).toBe(429);
        for (const one of held) one.close();
        // Two more may start once the server has seen them go.
        await until(async () => {
          const response = await exportOf("subareas", { base, key });
          await response.text();
          return response.status === 200;
        }, { what: "the abandoned exports to end" });
      } finally {
        release();
      }
    }
  }, 60_000);

  test("a client that takes nothing for the stall time loses its export: the connection is closed, the snapshot let go of", async () => {
    const stalling = await startTestServer({ testHooks: { exportStallMs: 1_000 } });
    try {
      await seedReferenceData(stalling.base, stalling.key);
      await importAndWait(stalling.base, "assets", stalling.key, Array.from({ length: 5_000 }, (_, i) => asset(i, { description: "x".repeat(3_000) })));
      const held = [await pausedExport(stalling.base, stalling.key), await pausedExport(stalling.base, stalling.key)];
      for (const one of held) expect((await one.head).status).toBe(200);
      expect((await exportOf("assets", { base: stalling.base, key: stalling.key })).status).toBe(429);
      await until(() => stalling.logs.filter((entry) => entry.msg === "export ended: its client stopped reading").length === 2, { what: "both stalled exports to end", deadlineMs: 20_000 });
      expect(stalling.logs.find((entry) => entry.msg === "export ended: its client stopped reading")).toMatchObject({ level: "warn", resource: "assets", why: "its client took nothing for 1 s" });
      // Read on, each body ends cut off: no last, empty chunk.
      for (const one of held) expect(await one.complete()).toBe(false);
      const next = await exportOf("assets", { base: stalling.base, key: stalling.key });
      expect(next.status).toBe(200);
      expect(await ndjson(next)).toHaveLength(5_000);
    } finally {
      await stalling.close();
    }
  }, 60_000);

  notOverHttps("an export whose thread is lost is cut short and logged; the next export gets a new thread and is whole", async () => {
    const losing = await startTestServer({ testHooks: { exportThreadEndsAfterChunks: 2 } });
    try {
      await seedReferenceData(losing.base, losing.key);
      await importAndWait(losing.base, "assets", losing.key, assets(5_000));
      const cut = await pausedExport(losing.base, losing.key);
      expect((await cut.head).status).toBe(200);
      // Two slices of 1,000 records came, then the thread ended: no last, empty chunk.
      expect(await cut.complete()).toBe(false);
      await until(() => losing.logs.some((entry) => entry.msg === "export cut short"), { what: "the cut export to be logged" });
      expect(losing.logs.find((entry) => entry.msg === "export cut short")).toMatchObject({ level: "error", resource: "assets" });
      expect(String(losing.logs.find((entry) => entry.msg === "export cut short")!.error)).toContain("the exports' thread ended");
      // A new thread; this one is lost after two slices of its own, so ask for less than that.
      const next = await exportOf("subareas", { base: losing.base, key: losing.key });
      expect(next.status).toBe(200);
      expect((await ndjson(next)).length).toBeGreaterThan(0);
    } finally {
      await losing.close();
    }
  }, 60_000);

  test("round trip: an export imported again with importd import leaves every record unchanged, as NDJSON and as CSV", async () => {
    const { base, key } = await server.addEnvironment("roundtrip");
    await seedReferenceData(base, key);
    const awkward = [
      asset(1, { name: "=1+2", description: "'starts with a quote", geolocation: { linearReferenceStart: "-LR", linearReferenceEnd: "@x", locationStart: -5.25, locationEnd: 1e-7, locationUnit: "km" } }),
      asset(2, { name: 'Comma, "quotes"\r\nand a CRLF', description: undefined, startPoint: 0.1 + 0.2, endPoint: 1e21 }),
      asset(3, { name: "\ttab first", description: "ünïcødé 💧" }),
      ...assets(200, 10),
    ];
    await importAndWait(base, "assets", key, awkward);
    for (const format of ["ndjson", "csv"] as const) {
      const response = await exportOf("assets", { base, key, accept: format === "csv" ? "text/csv" : undefined });
      const file = join(dir, `assets-export.${format}`);
      writeFileSync(file, await response.text());
      const run = await importd(["import", file, "--resource", "assets", "--base-url", base], { IMPORTD_API_KEY: key });
      expect(run.code).toBe(0);
      const jobId = Number(/\(job (\d+)\)\.\n/.exec(run.stdout)![1]);
      expect((await waitForJob(base, key, jobId)).output).toMatchObject({ total: awkward.length, created: 0, updated: 0, unchanged: awkward.length, rejected: 0 });
    }
  }, 60_000);
});

describe("importd export", () => {
  test("writes the export to -o's file (CSV by its name), says how many records, and imports back unchanged", async () => {
    const { base, key } = await server.addEnvironment("cli");
    await seedReferenceData(base, key);
    await importAndWait(base, "assets", key, assets(1_500));
    const file = join(dir, "cli-assets.csv");
    const run = await importd(["export", "--resource", "assets", "--base-url", base, "-o", file], { IMPORTD_API_KEY: key });
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(new RegExp(`^${file}: 1500 assets records \\(csv, [0-9.]+ MB\\) in \\d+ s\\.\\n$`));
    expect(readText(file, "utf8")).toBe(await (await exportOf("assets", { base, key, accept: "text/csv" })).text());
    expect(existsSync(`${file}.importd-partial`)).toBe(false);
    const again = await importd(["import", file, "--resource", "assets", "--base-url", base], { IMPORTD_API_KEY: key });
    expect(again.code).toBe(0);
    const jobId = Number(/\(job (\d+)\)\.\n/.exec(again.stdout)![1]);
    expect((await waitForJob(base, key, jobId)).output).toMatchObject({ created: 0, updated: 0, unchanged: 1_500 });
  }, 60_000);

  notOverHttps("NDJSON to stdout by default; --updated-since narrows it, and a bad one exits 2 saying why", async () => {
    const { base, key } = await server.addEnvironment("cli-stdout");
    await seedReferenceData(base, key);
    await importAndWait(base, "subareas", key, [{ id: "east", name: "East" }]);
    const all = await importd(["export", "--resource", "subareas", "--base-url", base], { IMPORTD_API_KEY: key });
    expect(all.code).toBe(0);
    expect(lines(all.stdout).map((line) => JSON.parse(line).id)).toEqual(["east", "north", "south"]);
    const none = await importd(["export", "--resource", "subareas", "--base-url", base, "--updated-since", "2999-01-01"], { IMPORTD_API_KEY: key });
    expect(none.stdout).toBe("");
    expect(none.stderr).toContain("stdout: 0 subareas records");
    const bad = await importd(["export", "--resource", "subareas", "--base-url", base, "--updated-since", "last week", "-o", join(dir, "never.ndjson")], { IMPORTD_API_KEY: key });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("'Updated Since' must be an ISO 8601 timestamp");
    expect(existsSync(join(dir, "never.ndjson"))).toBe(false);
    const refused = await importd(["export", "--resource", "subareas", "--base-url", base], { IMPORTD_API_KEY: "wrong" });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("the server refused the API key (401)");
  }, 60_000);
});
