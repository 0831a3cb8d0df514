import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { importAndWait } from "../helpers/api";
import { asset, assets, seedReferenceData } from "../helpers/records";
import { stopChecking } from "../helpers/contract";
import { startTestServer, type TestServer } from "../helpers/server";

// No environment's name or numbers in an answer that needs no key (DECISIONS 15): every such answer is walked with
// two environments holding data (records, finished jobs, a job waiting), and neither name appears; under an
// environment's path, an answer without a good key is the same for a name that exists and one that does not.

let server: TestServer;
const tenants = ["acme-widgets", "globex-holdings"];
const unknown = ["zzzz-widgets", "nobody-holdings"];
beforeAll(async () => {
  server = await startTestServer();
  // Odd paths on purpose: what matters here is what the answers tell, which the document's checker does not judge.
  stopChecking(server.url);
  for (const slug of tenants) {
    const tenant = await server.addEnvironment(slug);
    await seedReferenceData(tenant.base, tenant.key);
    await importAndWait(tenant.base, "assets", tenant.key, [...assets(7), asset(99, { subAreaId: "nowhere" })]);
  }
  // Waiting until the server closes, so that the queue has something per environment to tell (on PostgreSQL, parked
  // for the default 3 s, the jobs ran before the metrics test once, on a machine at load 17).
  await server.parkJob(tenants[0]!, "until released");
  await server.parkJob(tenants[1]!, "until released");
});
afterAll(() => server.close());

type Seen = { status: number; headers: Record<string, string>; body: string };
async function ask(path: string, init: RequestInit = {}): Promise<Seen> {
  const response = await fetch(`${server.url}${path}`, { redirect: "manual", ...init });
  const body = init.method === "HEAD" ? "" : await response.text();
  const headers = Object.fromEntries([...response.headers].filter(([name]) => name !== "date"));
  return { status: response.status, headers, body };
}

/** The console's page and the files it loads. */
async function consolePaths(): Promise<string[]> {
  const html = (await ask("/console")).body;
  return ["/console", "/console/", ...[...html.matchAll(/(?:src|href)="(\/[^"]+)"/g)].map((match) => match[1]!)];
}

describe("answers to requests that name no environment", () => {
  test("/healthz, /readyz, /metrics, Swagger UI and its document, the console and its files, and odd paths tell neither environment's name", async () => {
    const paths = [
      "/",
      "/healthz",
      "/readyz",
      "/metrics",
      "/swagger",
      "/swagger/",
      "/swagger/json",
      "/swagger/assets/swagger-ui.css",
      "/swagger/assets/swagger-init.js",
      ...(await consolePaths()),
      "/nowhere",
      "/nowhere.js",
      "/v2/jobs",
      "/v2/status/1",
      "//v2/jobs",
      "/%2e%2e/v2/jobs",
      "/default/v2/jobs",
      "/default/v2/status/1",
      "/default",
      "/metrics/extra",
      "/healthz?environment=*",
    ];
    const answers: Array<[string, Seen]> = [];
    for (const path of paths) answers.push([`GET ${path}`, await ask(path)]);
    for (const method of ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]) {
      for (const path of ["/", "/metrics", "/healthz", "/console", "/swagger", "/default/v2/jobs"]) answers.push([`${method} ${path}`, await ask(path, { method })]);
    }
    expect(answers.filter(([, seen]) => seen.status >= 500)).toEqual([]);
    for (const [request, seen] of answers) {
      const text = `${JSON.stringify(seen.headers)}\n${seen.body}`.toLowerCase();
      for (const slug of tenants) expect({ request, mentions: text.includes(slug) }).toEqual({ request, mentions: false });
    }
  }, 60_000);

  test("/metrics has no series by environment, only totals: its queue depth is one sample, all environments together", async () => {
    const text = (await ask("/metrics")).body;
    expect(text).not.toMatch(/environment="/);
    const depth = text.split("\n").filter((line) => line.startsWith("importd_queue_depth"));
    expect(depth).toEqual(["importd_queue_depth 2"]);
  });
});

describe("answers under an environment's path, without a good key", () => {
  // What a caller without a key might try, {env} standing for the name it guesses.
  const probes: Array<[string, string, Record<string, string>?]> = [
    ["GET", "/{env}/v2/jobs"],
    ["GET", "/{env}/v2/jobs", { "api-key": `${"ab".repeat(32)}_1` }],
    ["GET", "/{env}/v2/jobs", { "api-key": "not a key" }],
    ["GET", "/{env}/v2/status/1"],
    ["GET", "/{env}/v2/status/1/rejected"],
    ["GET", "/{env}/v2/assets"],
    ["GET", "/{env}/v2/nothing-here"],
    ["DELETE", "/{env}/v2/jobs"],
    ["PUT", "/{env}/v2/assets"],
    ["POST", "/{env}/v2/assets"],
    ["GET", "/{env}/v2"],
    ["GET", "/{env}/v2/"],
    ["GET", "/{env}"],
    ["GET", "/{env}/"],
    ["GET", "/{env}/v3/jobs"],
    ["GET", "/{env}/console"],
  ];

  test("401, 404 and 405 answers are the same for an environment that exists and one that does not: names cannot be guessed", async () => {
    for (const [index, slug] of tenants.entries()) {
      const stranger = unknown[index]!;
      expect(stranger.length).toBe(slug.length);
      for (const [method, template, headers] of probes) {
        const init = { method, headers: { ...headers, ...(method === "POST" || method === "PUT" ? { "content-type": "application/json" } : {}) }, body: method === "POST" || method === "PUT" ? "[]" : undefined };
        const real = await ask(template.replace("{env}", slug), init);
        const guess = await ask(template.replace("{env}", stranger), init);
        const request = `${method} ${template} ${JSON.stringify(headers ?? {})}`;
        expect({ request, ...real, body: real.body.replaceAll(slug, "{env}") }).toEqual({ request, ...guess, body: guess.body.replaceAll(stranger, "{env}") });
        expect({ request, status: real.status < 500 }).toEqual({ request, status: true });
      }
    }
  }, 60_000);
});
