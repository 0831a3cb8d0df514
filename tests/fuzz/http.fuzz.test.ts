import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { connect } from "node:net";
import { rmSync } from "node:fs";
import { resources } from "../../src/resources/registry";
import { terminal } from "../helpers/api";
import { asShipped, spawnServer, type ServerProcess } from "../helpers/process";
import { asset, seedReferenceData } from "../helpers/records";
import { tempDir } from "../helpers/server";

// Hostile input against a real server process: never a 5xx, the process stays up, memory stays bounded.
// A fixed seed makes a CI failure reproducible; fast-check prints the seed and the shrunk case on failure.
// Every landing runs each property half its count (about 2,000 requests); `npm run test:long` runs the full count,
// and `npm run fuzz` 20 times it (FUZZ_SCALE; FUZZ_SEED picks another seed).
const seed = Number(process.env.FUZZ_SEED ?? 20261123);
const scale = Number(process.env.FUZZ_SCALE ?? 0.5);
const runs = (count: number) => ({ seed, numRuns: Math.max(1, Math.round(count * scale)), endOnFailure: true });
const timeout = 120_000 * Math.max(1, scale);

const dataDir = tempDir("importd-fuzz-");
let server: ServerProcess;
let key: string;
let cases = 0;
beforeAll(async () => {
  server = await spawnServer(dataDir, ["--workers", "2", "--auth-failures-per-minute", "0"], 30_000, asShipped);
  key = server.firstRunKey!;
  await seedReferenceData(`${server.url}/default`, key);
});
afterAll(() => {
  console.log(`fuzz: ${cases} requests, seed ${seed}, scale ${scale}`);
  server.proc.kill("SIGKILL");
  rmSync(dataDir, { recursive: true, force: true });
});

const errorKey = /^(\$|\[\d+\](\.\w+){0,2})$/;

/** Sends, then checks what every answer must be: no 5xx, and Problem Details for every error. */
async function send(path: string, init: RequestInit = {}): Promise<Response> {
  cases++;
  const response = await fetch(`${server.url}${path}`, init);
  if (response.status >= 500) throw new Error(`${init.method ?? "GET"} ${path} answered ${response.status}: ${await response.text()}`);
  if (response.status >= 400) {
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    const problem = await response.json();
    expect(problem.status).toBe(response.status);
    if (problem.errors) for (const field of Object.keys(problem.errors)) expect(field).toMatch(errorKey);
  } else {
    await response.arrayBuffer();
  }
  return response;
}

const postImport = (resource: string, body: BodyInit, headers: Record<string, string> = {}) =>
  send(`/default/v2/${resource}`, { method: "POST", body, headers: { "content-type": "application/json", "api-key": key, ...headers } });

const resourcePath = fc.constantFrom(...resources.map((resource) => resource.path));
const accepted = (status: number) => expect([202, 400]).toContain(status);

/** Keys that have bitten JavaScript services before. */
const nastyKey = fc.constantFrom("__proto__", "constructor", "prototype", "toString", "hasOwnProperty", "valueOf", "", " ", "id ", "ID", "\u0000");
const nastyValue = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.string({ maxLength: 70_000 }),
  fc.constantFrom(1e308, -1e308, Number.MAX_SAFE_INTEGER + 2, -0, 0.1 + 0.2, "", " ", "\u0000", "\ud800", "💧".repeat(100)),
);

/** A valid batch of assets with random damage done to its records. */
const damagedBatch = fc
  .tuple(
    fc.integer({ min: 1, max: 20 }),
    fc.array(fc.tuple(fc.nat(), fc.oneof(fc.constant("delete"), fc.constant("set"), fc.constant("add")), fc.constantFrom(...Object.keys(asset(0)), "geolocation"), nastyKey, nastyValue), { maxLength: 8 }),
  )
  .map(([count, damage]) => {
    const records: Array<Record<string, unknown>> = Array.from({ length: count }, (_, i) => asset(i));
    for (const [at, kind, field, nasty, value] of damage) {
      const record = records[at % count]!;
      if (kind === "delete") delete record[field];
      else if (kind === "set") record[field] = value;
      else Object.defineProperty(record, nasty, { value, enumerable: true, configurable: true, writable: true });
    }
    return JSON.stringify(records);
  });

describe("import bodies", () => {
  test("any JSON document is a 202 or a 400", async () => {
    await fc.assert(fc.asyncProperty(resourcePath, fc.jsonValue({ maxDepth: 8 }), async (resource, value) => accepted((await postImport(resource, JSON.stringify(value))).status)), runs(800));
  }, timeout);

  test("valid batches with damaged records (missing, wrong, huge or poisonous fields) are a 202 or a 400", async () => {
    await fc.assert(fc.asyncProperty(damagedBatch, async (body) => accepted((await postImport("assets", body)).status)), runs(800));
  }, timeout);

  test("JSON text mutated byte by byte, duplicate keys included, is a 202 or a 400", async () => {
    const text = JSON.stringify([asset(1), asset(2)]);
    const mutation = fc.oneof(
      fc.tuple(fc.nat(text.length), fc.nat(20)).map(([at, length]) => text.slice(0, at) + text.slice(at + length)),
      fc.tuple(fc.nat(text.length), fc.string({ maxLength: 10 })).map(([at, insert]) => text.slice(0, at) + insert + text.slice(at)),
      fc.constantFrom('"name":', '"id":', '"geolocation":{').map((field) => text.replace(field, `${field}"first",${field}`)),
    );
    await fc.assert(fc.asyncProperty(mutation, async (body) => accepted((await postImport("assets", body)).status)), runs(600));
  }, timeout);

  test("random bytes, invalid UTF-8 included, are a 400", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 1, maxLength: 4096 }), async (bytes) => expect((await postImport("assets", bytes)).status).toBe(400)),
      runs(400),
    );
  }, timeout);

  test("deep nesting, huge numbers and a 100 MB body of white space are a 400, quickly", async () => {
    expect((await postImport("assets", "[".repeat(1_000_000))).status).toBe(400);
    expect((await postImport("assets", `${"[".repeat(100_000)}${"]".repeat(100_000)}`)).status).toBe(400);
    expect((await postImport("assets", `[{"id":"x","startPoint":1${"0".repeat(400)}}]`)).status).toBe(400);
    const started = performance.now();
    const spaces = new Uint8Array(100 * 1024 * 1024 - 2).fill(0x20);
    expect((await postImport("assets", new Blob([spaces, "[]"]))).status).toBe(400);
    console.log(`100 MB of white space refused in ${(performance.now() - started).toFixed(0)} ms`);
  }, timeout);
});

describe("headers", () => {
  const printable = fc.stringMatching(/^[\x20-\x7e]{0,200}$/);
  test("any Content-Type is a 202, a 400 or a 415", async () => {
    await fc.assert(
      fc.asyncProperty(printable, async (type) => expect([202, 400, 415]).toContain((await postImport("subareas", '[{"id":"a","name":"A"}]', { "content-type": type })).status)),
      runs(300),
    );
  }, timeout);

  test("any Api-Key but the right one is a 401", async () => {
    await fc.assert(
      fc.asyncProperty(printable, async (candidate) => {
        fc.pre(candidate.trim() !== key);
        expect((await send("/default/v2/jobs", { headers: { "api-key": candidate } })).status).toBe(401);
      }),
      runs(300),
    );
  }, timeout);
});

describe("paths", () => {
  const odd = fc.oneof(
    fc.webSegment(),
    fc.string({ maxLength: 40 }).map(encodeURIComponent),
    fc.constantFrom("..", "%2e%2e", "%2e%2e%2f", "..%2f..%2fetc%2fpasswd", "%00", "%ff", "%", "%zz", "default%00", "DEFAULT", "default.", "a".repeat(5000), "1e3", "-1", "0x10", "9".repeat(40), "%F0%9F%92%A7"),
  );
  test("odd environment slugs and job ids are a 4xx, or the job", async () => {
    await fc.assert(
      fc.asyncProperty(odd, odd, fc.constantFrom("status/", "jobs?after=", "assets/", "subareas?limit=", "assets?after="), async (env, id, route) => {
        const response = await send(`/${env}/v2/${route}${id}`, { headers: { "api-key": key } });
        expect(response.status).toBeLessThan(500);
      }),
      runs(600),
    );
  }, timeout);
});

/** One raw HTTP/1.1 exchange, for what fetch will not send: lying Content-Lengths, slow bodies. */
function raw(head: string, body: string[] = [], pauseMs = 0, hangUpMs = 10_000): Promise<string> {
  cases++;
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(server.url).port), "127.0.0.1");
    let answer = "";
    socket.on("data", (data) => {
      answer += data.toString("latin1");
      if (answer.includes("\r\n\r\n")) socket.end();
    });
    socket.on("close", () => resolve(answer));
    socket.on("error", (error) => (answer ? resolve(answer) : reject(error)));
    socket.write(head);
    void (async () => {
      for (const part of body) {
        if (socket.destroyed) return;
        await Bun.sleep(pauseMs);
        socket.write(part);
      }
    })();
    setTimeout(() => socket.destroy(), hangUpMs);
  });
}
const statusOf = (answer: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0);
const rawPost = (contentLength: string, body: string[] = [], pauseMs = 0, hangUpMs?: number) =>
  raw(`POST /default/v2/subareas HTTP/1.1\r\nHost: localhost\r\nApi-Key: ${key}\r\nContent-Type: application/json\r\nContent-Length: ${contentLength}\r\n\r\n`, body, pauseMs, hangUpMs);

describe("the wire", () => {
  test("absurd Content-Length values are refused without a 5xx", async () => {
    const seen: string[] = [];
    for (const length of ["99999999999999999999", "104857601", "-1", "abc", "1e9", " 12", "0x10"]) {
      const status = statusOf(await rawPost(length, ['[{"id":"a","name":"A"}]']));
      seen.push(`${length.trim()}→${status || "closed"}`);
      // Refused as malformed (400), too large (413), or by Bun closing the connection (no status at all).
      expect({ length, refused: status === 0 || (status >= 400 && status < 500) }).toEqual({ length, refused: true });
    }
    console.log(`Content-Length: ${seen.join(", ")}`);
  }, timeout);

  test("a slow body is accepted, and the server answers others meanwhile", async () => {
    const body = '[{"id":"slow","name":"Slow"}]';
    const slow = rawPost(String(body.length), body.split(""), 40);
    await Bun.sleep(200);
    const started = performance.now();
    expect((await send("/healthz")).status).toBe(200);
    expect(performance.now() - started).toBeLessThan(500);
    expect(statusOf(await slow)).toBe(202);
  }, timeout);

  test("a body shorter than its Content-Length, then a hang-up, breaks nothing", async () => {
    expect(await rawPost("1000", ['[{"id":"cut"'], 0, 300).catch(() => "")).toBe("");
    expect((await send("/healthz")).status).toBe(200);
  }, timeout);
});

/** A whole raw exchange sent with `Connection: close`: the status, the headers, and the body by Content-Length (or chunks) or up to the close. */
type RawAnswer = { status: number; headers: Map<string, string>; body: string; text: string };
function exchange(request: string): Promise<RawAnswer> {
  cases++;
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(server.url).port), "127.0.0.1");
    const chunks: Buffer[] = [];
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      const bytes = Buffer.concat(chunks);
      const end = bytes.indexOf("\r\n\r\n");
      if (end === -1) return reject(new Error(`no complete answer to ${JSON.stringify(request.slice(0, 300))}: ${JSON.stringify(bytes.toString("latin1").slice(0, 300))}`));
      const [statusLine, ...lines] = bytes.subarray(0, end).toString("latin1").split("\r\n");
      const headers = new Map<string, string>();
      for (const line of lines) {
        const colon = line.indexOf(":");
        const name = line.slice(0, colon).trim().toLowerCase();
        headers.set(name, headers.has(name) ? `${headers.get(name)}, ${line.slice(colon + 1).trim()}` : line.slice(colon + 1).trim());
      }
      let body = bytes.subarray(end + 4);
      const length = headers.get("content-length");
      if (length !== undefined) body = body.subarray(0, Number(length));
      else if (/chunked/i.test(headers.get("transfer-encoding") ?? "")) {
        const parts: Buffer[] = [];
        for (let at = 0; ; ) {
          const lineEnd = body.indexOf("\r\n", at);
          const size = parseInt(body.subarray(at, lineEnd).toString("latin1"), 16);
          if (lineEnd === -1 || !(size > 0)) break;
          parts.push(body.subarray(lineEnd + 2, lineEnd + 2 + size));
          at = lineEnd + 2 + size + 2;
        }
        body = Buffer.concat(parts);
      }
      const text = body.toString("utf8");
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3}) /.exec(statusLine!)?.[1] ?? 0), headers, body: text, text: `${statusLine}\n${text.slice(0, 2000)}` });
    };
    socket.on("data", (data: Buffer) => chunks.push(data));
    socket.on("close", finish);
    socket.on("error", () => undefined);
    const timer = setTimeout(finish, 10_000);
    socket.write(Buffer.from(request, "latin1"));
  });
}

describe("the Host header and the request target", () => {
  // What a stack trace, a source path or Bun's development error page look like in an answer.
  const leaks = [/\/work\//, /\.ts:\d/, /^\s*at [\w.$<>]+ ?\(/m, /\bat [\w.$<>]+ \((?:\/|file:|node:|bun:)/, /<!doctype html/i, /node_modules/];

  /** Which route must answer, with or without the valid key. */
  const routes: Record<string, { withKey: number; withoutKey: number; looksLike: (body: string) => boolean }> = {
    "/healthz": { withKey: 200, withoutKey: 200, looksLike: (body) => JSON.parse(body).status === "ok" },
    "/readyz": { withKey: 200, withoutKey: 200, looksLike: (body) => JSON.parse(body).status === "ready" },
    "/default/v2/status/1": { withKey: 200, withoutKey: 401, looksLike: (body) => JSON.parse(body).id === 1 },
    "/default/v2/jobs": { withKey: 200, withoutKey: 401, looksLike: (body) => Array.isArray(JSON.parse(body).items) },
    "/swagger/json": { withKey: 200, withoutKey: 200, looksLike: (body) => typeof JSON.parse(body).openapi === "string" },
    "/nope": { withKey: 404, withoutKey: 404, looksLike: () => true },
  };
  const path = fc.constantFrom(...Object.keys(routes));

  const hostChar = fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789.-");
  const hostName = fc.oneof(fc.constantFrom("localhost", "127.0.0.1", "[::1]", "importd.example", "x"), fc.string({ unit: hostChar, minLength: 1, maxLength: 12 }));
  const host = fc.oneof(
    // short: the issue's misrouting started under four characters
    fc.string({ unit: hostChar, minLength: 1, maxLength: 3 }),
    // long: up to a few KB, still under Bun's header limit
    fc.string({ unit: hostChar, minLength: 200, maxLength: 4000 }),
    fc.tuple(hostName, fc.oneof(fc.integer({ min: 0, max: 99_999 }).map(String), fc.constantFrom("", "x", "-1"))).map(([name, port]) => `${name}:${port}`),
    fc.tuple(fc.stringMatching(/^[\w.~%!$&'()*+,;=-]{0,12}$/), fc.stringMatching(/^[\w.~%!$&'()*+,;=:-]{0,12}$/), hostName).map(([user, password, name]) => `${user}:${password}@${name}`),
    // odd: any printable ASCII, characters a URL may not hold, bytes above ASCII, nothing at all
    fc.stringMatching(/^[\x21-\x7e][\x20-\x7e]{0,40}$/),
    fc.constantFrom("", "a b", "%zz", "%", "ex/ample?#frag", "[::1", "]", "@", ":", "::", "..", "*", "http://x", "a\tb", "\xe9t\xe9", "\xff\xfe", "\\\\server", "<script>", "{}|^`"),
  );
  const apiKey = fc.boolean();

  /** A Host header as sent: none (HTTP/1.0 only), one, or two (duplicates). */
  const hosts = (version: string) => fc.array(host, { minLength: version === "HTTP/1.0" ? 0 : 1, maxLength: 2 });
  const version = fc.constantFrom("HTTP/1.0", "HTTP/1.1");
  const authority = fc.constantFrom("x", "a", "x:99", "localhost:8080", "user:pw@x", "[::1]:1", "127.0.0.1", "importd.example");

  const headOf = (method: string, target: string, httpVersion: string, hostValues: string[], withKey: boolean) =>
    [`${method} ${target} ${httpVersion}`, ...hostValues.map((value) => `Host: ${value}`), ...(withKey ? [`Api-Key: ${key}`] : []), "Connection: close", "", ""].join("\r\n");

  /** Every answer: no 5xx, nothing leaked, Problem Details for errors, and the route its path names. */
  function check(answer: RawAnswer, route: string, withKey: boolean, request: string) {
    const context = `${JSON.stringify(request.length > 400 ? `${request.slice(0, 400)}…` : request)} answered\n${answer.text}`;
    if (answer.status === 0 || answer.status >= 500) throw new Error(`${context}`);
    for (const leak of leaks) if (leak.test(answer.body)) throw new Error(`leaks ${leak}: ${context}`);
    const expected = routes[route]!;
    const status = withKey ? expected.withKey : expected.withoutKey;
    if (answer.status !== status) throw new Error(`expected ${status}: ${context}`);
    if (status >= 400) {
      if (answer.headers.get("content-type") !== "application/problem+json") throw new Error(`not Problem Details: ${context}`);
      if (JSON.parse(answer.body).status !== status) throw new Error(`Problem Details with another status: ${context}`);
    } else if (!expected.looksLike(answer.body)) throw new Error(`another route answered: ${context}`);
  }

  test("a known request gets its route's answer whatever the Host: none on HTTP/1.0, short, with a port, absolute-form", async () => {
    // The issue's cases, spelt out: each failed before (500 with Bun's HTML error page, or 404 for a short Host).
    const known: Array<[string, string, boolean, string]> = [
      ["GET /healthz HTTP/1.0\r\n\r\n", "/healthz", false, "HTTP/1.0 without Host, as HAProxy's default check sends"],
      ["OPTIONS / HTTP/1.0\r\n\r\n", "", false, "HAProxy's bare option httpchk"],
      ["GET /readyz HTTP/1.0\r\nConnection: close\r\n\r\n", "/readyz", false, "HTTP/1.0 /readyz without Host"],
      [headOf("GET", "/default/v2/jobs", "HTTP/1.1", ["a"], true), "/default/v2/jobs", true, "Host: a"],
      [headOf("GET", "/default/v2/status/1", "HTTP/1.1", ["ab"], true), "/default/v2/status/1", true, "Host: ab"],
      [headOf("GET", "/default/v2/jobs", "HTTP/1.1", ["localhost:8080"], true), "/default/v2/jobs", true, "Host with a port"],
      [headOf("GET", "/healthz", "HTTP/1.1", ["user:pw@h"], false), "/healthz", false, "Host with a userinfo part"],
      [headOf("GET", "/healthz", "HTTP/1.1", ["a b"], false), "/healthz", false, "Host with a space"],
      [headOf("GET", "/healthz", "HTTP/1.1", [""], false), "/healthz", false, "empty Host"],
      [headOf("GET", "/default/v2/jobs", "HTTP/1.1", ["a", "b"], true), "/default/v2/jobs", true, "two short Host headers"],
      [headOf("GET", "http://x/healthz", "HTTP/1.1", ["localhost"], false), "/healthz", false, "absolute-form target"],
      [headOf("GET", "http://x/default/v2/jobs", "HTTP/1.0", [], true), "/default/v2/jobs", true, "absolute-form target on HTTP/1.0 without Host"],
    ];
    const failures: string[] = [];
    for (const [request, route, withKey, name] of known) {
      const answer = await exchange(request);
      try {
        if (route === "") {
          // OPTIONS / is no route of importd's: any 4xx as Problem Details will do, never a 5xx or a page.
          if (!(answer.status >= 400 && answer.status < 500) || answer.headers.get("content-type") !== "application/problem+json" || leaks.some((leak) => leak.test(answer.body)))
            throw new Error(`expected a 4xx Problem Details: ${answer.text.slice(0, 300)}`);
        } else check(answer, route, withKey, request);
      } catch (error) {
        failures.push(`${name}: ${(error as Error).message.slice(0, 300)}`);
      }
    }
    expect(failures).toEqual([]);
  }, timeout);

  test("any Host header (none, short, long, with a port or a userinfo, odd, twice) reaches the route its path names", async () => {
    await fc.assert(
      fc.asyncProperty(
        version.chain((v) => fc.tuple(fc.constant(v), hosts(v))),
        path,
        apiKey,
        async ([httpVersion, hostValues], route, withKey) => {
          const request = headOf("GET", route, httpVersion, hostValues, withKey);
          check(await exchange(request), route, withKey, request);
        },
      ),
      runs(120),
    );
    expect((await send("/healthz")).status).toBe(200);
  }, timeout);

  test("an absolute-form request target is routed by its path, whatever its authority and the Host", async () => {
    await fc.assert(
      fc.asyncProperty(
        version.chain((v) => fc.tuple(fc.constant(v), hosts(v))),
        fc.constantFrom("http", "https"),
        authority,
        path,
        apiKey,
        async ([httpVersion, hostValues], scheme, target, route, withKey) => {
          const request = headOf("GET", `${scheme}://${target}${route}`, httpVersion, hostValues, withKey);
          check(await exchange(request), route, withKey, request);
        },
      ),
      runs(60),
    );
    expect(server.proc.exitCode).toBeNull();
    expect((await send("/healthz")).status).toBe(200);
  }, timeout);
});

describe("afterwards", () => {
  test("the server is up, every accepted job is terminal, and its memory stayed bounded", async () => {
    expect(server.proc.exitCode).toBeNull();
    const deadline = Date.now() + 60_000;
    for (;;) {
      const page = await (await fetch(`${server.url}/default/v2/jobs?limit=1000`, { headers: { "api-key": key } })).json();
      if (page.items.every((job: { importJobStatus: string }) => terminal.has(job.importJobStatus))) break;
      if (Date.now() > deadline) throw new Error("jobs accepted during fuzzing did not finish");
      await Bun.sleep(100);
    }
    const status = await Bun.file(`/proc/${server.proc.pid}/status`).text();
    const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)![1]);
    console.log(`server memory: peak ${(kb("VmHWM") / 1024).toFixed(0)} MB, now ${(kb("VmRSS") / 1024).toFixed(0)} MB`);
    // A 100 MB body is held as bytes, then as text and parsed on a worker: a few times its size at the peak.
    expect(kb("VmHWM")).toBeLessThan(1024 * 1024);
    expect((await send("/readyz")).status).toBe(200);
  }, timeout);
});
