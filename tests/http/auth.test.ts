import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, existsSync } from "node:fs";
import { Access } from "../../src/access/access";
import { parseKey } from "../../src/access/api-key";
import { databaseFile } from "../../src/store/sqlite/database";
import { importAndWait, postJson } from "../helpers/api";
import { projectRoot, importdCommand } from "../helpers/process";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

let server: TestServer;
/** A second environment with its own key. */
let other: { slug: string; key: string; base: string };
/** A key of `default` that was revoked. */
let revokedKey: string;
/** A finished job of `default`: with a valid key its status is 200, so a 401 is auth's doing. */
let jobId: number;
/** The body of the first 401 seen; every other 401 must match it byte for byte. */
let reference401: string;

beforeAll(async () => {
  server = await startTestServer();
  other = await server.addEnvironment("other");
  const access = new Access((await server.store()).access);
  revokedKey = await access.createKey("default");
  await access.revokeKey(parseKey(revokedKey)!.keyId);
  await seedReferenceData(server.base, server.key);
  jobId = (await importAndWait(server.base, "assets", server.key, [asset(1)])).id;
  reference401 = await (await fetch(`${server.base}/v2/jobs`)).text();
});
afterAll(() => server.close());

/** Runs the CLI against the test server's store, as an operator would. */
async function cli(...args: string[]) {
  const where = server.databaseUrl ? ["--database-url", server.databaseUrl] : ["--data-dir", server.dataDir];
  const proc = Bun.spawn([...importdCommand, ...args, ...where], { cwd: projectRoot, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`importd ${args.join(" ")} exited ${code}: ${stderr}`);
  return stdout.trim();
}

const secretOf = (key: string) => parseKey(key)!.secret;
const idOf = (key: string) => parseKey(key)!.keyId;
const flipOneHexChar = (key: string) => (key[10] === "a" ? `${key.slice(0, 10)}b${key.slice(11)}` : `${key.slice(0, 10)}a${key.slice(11)}`);

type Call = { base: string; headers: Record<string, string> };
type Endpoint = { name: string; send: (call: Call) => Promise<Response>; ok: number };

const endpoints: Endpoint[] = [
  {
    name: "POST /v2/assets",
    send: ({ base, headers }) => fetch(`${base}/v2/assets`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify([asset(2)]) }),
    ok: 202,
  },
  { name: "GET /v2/status/{id}", send: ({ base, headers }) => fetch(`${base}/v2/status/${jobId}`, { headers }), ok: 200 },
  { name: "GET /v2/assets", send: ({ base, headers }) => fetch(`${base}/v2/assets`, { headers }), ok: 200 },
  { name: "GET /v2/jobs", send: ({ base, headers }) => fetch(`${base}/v2/jobs`, { headers }), ok: 200 },
];

// Built lazily: the keys exist only once beforeAll has run.
const rejected: Array<[string, () => Call]> = [
  ["the Api-Key header is missing", () => ({ base: server.base, headers: {} })],
  ["the header is spelled Api_Key", () => ({ base: server.base, headers: { Api_Key: server.key } })],
  ["the header is spelled ApiKey", () => ({ base: server.base, headers: { ApiKey: server.key } })],
  ["the header is spelled X-Api-Key", () => ({ base: server.base, headers: { "X-Api-Key": server.key } })],
  ["the key is sent as Authorization: Bearer", () => ({ base: server.base, headers: { Authorization: `Bearer ${server.key}` } })],
  ["the header value is empty", () => ({ base: server.base, headers: { "Api-Key": "" } })],
  ["one hex character of the secret is changed", () => ({ base: server.base, headers: { "Api-Key": flipOneHexChar(server.key) } })],
  ["the secret is sent without its _id", () => ({ base: server.base, headers: { "Api-Key": secretOf(server.key) } })],
  ["the keyId is sent alone as _<id>", () => ({ base: server.base, headers: { "Api-Key": `_${idOf(server.key)}` } })],
  ["the keyId is sent alone as <id>", () => ({ base: server.base, headers: { "Api-Key": String(idOf(server.key)) } })],
  ["the keyId is unknown", () => ({ base: server.base, headers: { "Api-Key": `${secretOf(server.key)}_999999` } })],
  ["the secret of one key is sent with the id of another", () => ({ base: server.base, headers: { "Api-Key": `${secretOf(server.key)}_${idOf(other.key)}` } })],
  ["the key is revoked", () => ({ base: server.base, headers: { "Api-Key": revokedKey } })],
  ["the key belongs to another environment", () => ({ base: server.base, headers: { "Api-Key": other.key } })],
  ["the environment slug is unknown", () => ({ base: `${server.url}/nope`, headers: { "Api-Key": server.key } })],
  ["the environment slug differs in letter case", () => ({ base: `${server.url}/DEFAULT`, headers: { "Api-Key": server.key } })],
];

async function expectUnauthorized(response: Response) {
  expect(response.status).toBe(401);
  expect(response.headers.get("content-type")).toBe("application/problem+json");
  expect(response.headers.get("www-authenticate")).toBe('Api-Key header="Api-Key"');
  expect(await response.text()).toBe(reference401);
}

describe("the 401 answer", () => {
  test("is Problem Details that do not tell which part failed", () => {
    const body = JSON.parse(reference401);
    expect(body).toMatchObject({ type: "https://tools.ietf.org/html/rfc9110#section-15.5.2", title: "Unauthorized", status: 401 });
    expect(body.detail).toContain("Api-Key");
  });
});

describe.each(endpoints)("$name", (endpoint) => {
  test(`answers ${endpoint.ok} with a valid key (so the 401s below are authentication's doing)`, async () => {
    const response = await endpoint.send({ base: server.base, headers: { "Api-Key": server.key } });
    expect(response.status).toBe(endpoint.ok);
  });

  test.each(rejected)("401 when %s, with the same body as every other 401", async (_, call) => {
    await expectUnauthorized(await endpoint.send(call()));
  });
});

describe("authentication comes before anything else about the request", () => {
  test("a POST without a key and with a body that is not an array is 401, not 400", async () => {
    await expectUnauthorized(await postJson(server.base, "assets", undefined, { not: "an array" }));
  });

  test("a POST without a key and with invalid JSON is 401, not 400", async () => {
    await expectUnauthorized(await postJson(server.base, "assets", undefined, "[{"));
  });

  test("a POST without a key and with Content-Type text/plain is 401, not 415", async () => {
    await expectUnauthorized(await postJson(server.base, "assets", undefined, "[]", { "content-type": "text/plain" }));
  });

  test("GET /v2/jobs with a bad status filter and no key is 401, not 400", async () => {
    await expectUnauthorized(await fetch(`${server.base}/v2/jobs?status=Bogus`));
  });

  test("GET /v2/status/{id} with a malformed id and a wrong key is 401, not 404", async () => {
    await expectUnauthorized(await fetch(`${server.base}/v2/status/abc`, { headers: { "Api-Key": other.key } }));
  });

  test("a rejected POST queues no job", async () => {
    const before = await (await fetch(`${server.base}/v2/jobs?limit=1000`, { headers: { "Api-Key": server.key } })).json();
    await expectUnauthorized(await postJson(server.base, "assets", other.key, [asset(3)]));
    const after = await (await fetch(`${server.base}/v2/jobs?limit=1000`, { headers: { "Api-Key": server.key } })).json();
    expect(after.items.length).toBe(before.items.length);
  });
});

describe("a 404 on status proves authentication succeeded", () => {
  test("an unknown job id with a valid key is 404 Problem Details", async () => {
    const response = await fetch(`${server.base}/v2/status/999999`, { headers: { "Api-Key": server.key } });
    expect(response.status).toBe(404);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect(await response.json()).toMatchObject({ title: "Not Found", status: 404 });
  });

  test("the header name is matched without regard to letter case, as HTTP requires", async () => {
    const response = await fetch(`${server.base}/v2/status/999999`, { headers: { "API-KEY": server.key } });
    expect(response.status).toBe(404);
  });
});

describe("keys managed with the CLI", () => {
  test("a key created with the CLI works on the running server at once", async () => {
    const key = await cli("key", "create", "default");
    expect(key).toMatch(/^[0-9a-f]{64}_\d+$/);
    const response = await fetch(`${server.base}/v2/status/999999`, { headers: { "Api-Key": key } });
    expect(response.status).toBe(404);
  }, 20_000);

  test("a key revoked with the CLI stops working at once", async () => {
    const key = await cli("key", "create", "default");
    // Used again and again first: on SQLite its check is then answered from memory (src/store/read-cache.ts).
    for (let i = 0; i < 5; i++) expect((await fetch(`${server.base}/v2/status/${jobId}`, { headers: { "Api-Key": key } })).status).toBe(200);
    await cli("key", "revoke", String(idOf(key)));
    await expectUnauthorized(await fetch(`${server.base}/v2/status/${jobId}`, { headers: { "Api-Key": key } }));
    await expectUnauthorized(await fetch(`${server.base}/v2/jobs`, { headers: { "Api-Key": key } }));
    // The other keys of the environment are untouched.
    expect((await fetch(`${server.base}/v2/jobs`, { headers: { "Api-Key": server.key } })).status).toBe(200);
  }, 20_000);

  test("a key that passed again and again in its environment still gets 401 in another", async () => {
    for (let i = 0; i < 5; i++) expect((await fetch(`${other.base}/v2/jobs`, { headers: { "Api-Key": other.key } })).status).toBe(200);
    await expectUnauthorized(await fetch(`${server.base}/v2/status/${jobId}`, { headers: { "Api-Key": other.key } }));
  });

  test("an environment created with the CLI is served at once", async () => {
    await cli("env", "create", "fresh");
    const key = await cli("key", "create", "fresh");
    expect((await fetch(`${server.url}/fresh/v2/jobs`, { headers: { "Api-Key": key } })).status).toBe(200);
    await expectUnauthorized(await fetch(`${server.base}/v2/jobs`, { headers: { "Api-Key": key } }));
  }, 20_000);
});

test("the database stores no secret, only its hash", async () => {
  const keys = [server.key, other.key, revokedKey, await cli("key", "create", "default"), (await server.addEnvironment("stored")).key];
  // On SQLite the files themselves; on PostgreSQL every column of every key row, as its bytes.
  const file = databaseFile(server.dataDir);
  const bytes = server.databaseUrl
    ? Buffer.concat((await server.query<Record<string, unknown>>("SELECT * FROM api_keys")).flatMap((row) => Object.values(row).map((value) => (Buffer.isBuffer(value) ? value : Buffer.from(String(value))))))
    : Buffer.concat([file, `${file}-wal`].filter(existsSync).map((path) => readFileSync(path)));
  for (const key of keys) {
    const secret = secretOf(key);
    expect(bytes.includes(secret)).toBe(false);
    expect(bytes.includes(Buffer.from(secret, "hex"))).toBe(false);
    // The hash is there: the check above looked at the right bytes.
    expect(bytes.includes(new Bun.CryptoHasher("sha256").update(secret).digest())).toBe(true);
  }
}, 20_000);

describe("environments are isolated", () => {
  test("env B's key gets 401 on every one of env A's URLs", async () => {
    for (const endpoint of endpoints) await expectUnauthorized(await endpoint.send({ base: server.base, headers: { "Api-Key": other.key } }));
  });

  test("env A's key gets 401 on env B's URLs", async () => {
    await expectUnauthorized(await fetch(`${other.base}/v2/jobs`, { headers: { "Api-Key": server.key } }));
  });

  test("env A's job id asked for with env B's key on env B's URL is 404, exactly like an unknown id", async () => {
    const foreign = await fetch(`${other.base}/v2/status/${jobId}`, { headers: { "Api-Key": other.key } });
    const unknown = await fetch(`${other.base}/v2/status/999999`, { headers: { "Api-Key": other.key } });
    expect(foreign.status).toBe(404);
    expect(unknown.status).toBe(404);
    expect(foreign.headers.get("content-type")).toBe("application/problem+json");
    expect(await foreign.text()).toBe(await unknown.text());
  });

  test("env B's job list does not show env A's jobs", async () => {
    const page = await (await fetch(`${other.base}/v2/jobs`, { headers: { "Api-Key": other.key } })).json();
    expect(page.items.map((job: { id: number }) => job.id)).not.toContain(jobId);
  });
});
