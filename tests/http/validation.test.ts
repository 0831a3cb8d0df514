import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { postJson, waitForJob, type JobDocument } from "../helpers/api";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";

/** Request-time validation through the real server: DECISIONS section 3, spec 7.1. */

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
});
afterAll(() => server.close());

const validationType = "https://tools.ietf.org/html/rfc9110#section-15.5.1";
const validationTitle = "One or more validation errors occurred.";

/** Checks the 400 Problem Details envelope and returns the document. */
async function expectValidationProblem(response: Response) {
  expect(response.status).toBe(400);
  expect(response.headers.get("content-type")).toBe("application/problem+json");
  const problem = (await response.json()) as { type: string; title: string; status: number; detail?: string; errors: Record<string, string[]> };
  expect(problem.type).toBe(validationType);
  expect(problem.title).toBe(validationTitle);
  expect(problem.status).toBe(400);
  expect(typeof problem.errors).toBe("object");
  return problem;
}

const postRaw = (base: string, key: string, body: string | Uint8Array, resource = "assets") => postJson(base, resource, key, body);

describe("400 Problem Details", () => {
  test("answers an empty subAreaId exactly as the DECISIONS example", async () => {
    const response = await postJson(server.base, "assets", server.key, [asset(0, { subAreaId: "" })]);
    expect(response.status).toBe(400);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect(await response.text()).toBe(
      `{"type":"https://tools.ietf.org/html/rfc9110#section-15.5.1","title":"One or more validation errors occurred.","status":400,"errors":{"[0].subAreaId":["'Sub Area Id' must not be empty."]}}`,
    );
  });

  test("has exactly type, title, status and errors when the map is not capped", async () => {
    const problem = await expectValidationProblem(await postJson(server.base, "assets", server.key, [asset(0), asset(1, { name: null, startPoint: "1" })]));
    expect(Object.keys(problem).sort()).toEqual(["errors", "status", "title", "type"]);
    expect(problem.errors).toEqual({
      "[1].name": ["'Name' must not be empty."],
      "[1].startPoint": ["'Start Point' must be a number. You sent a string."],
    });
  });

  test("keys nested geolocation errors as [i].geolocation.field", async () => {
    const geolocation = { ...asset(0).geolocation, locationStart: 9, locationEnd: 1 };
    const problem = await expectValidationProblem(await postJson(server.base, "assets", server.key, [asset(0), asset(1, { geolocation })]));
    expect(problem.errors).toEqual({ "[1].geolocation.locationStart": ["'Location Start' must be less than or equal to 'Location End'."] });
  });

  test.each([
    ["a single object instead of an array", JSON.stringify(asset(0))],
    ["a scalar", "42"],
    ["null", "null"],
    ["[]", "[]"],
    ["invalid JSON", '[{"id": "A",'],
    ["an empty body", ""],
  ])("rejects %s with $", async (_, body) => {
    const problem = await expectValidationProblem(await postRaw(server.base, server.key, body));
    expect(Object.keys(problem.errors)).toEqual(["$"]);
  });

  test("rejects invalid UTF-8 with $", async () => {
    const body = new Uint8Array([0x5b, 0x7b, 0x22, 0x69, 0x64, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d, 0x5d]);
    const problem = await expectValidationProblem(await postRaw(server.base, server.key, body));
    expect(problem.errors).toEqual({ $: ["The request body is not valid UTF-8. Send JSON encoded as UTF-8."] });
  });

  test("rejects 100000 levels of nested arrays with a 400, not a 5xx", async () => {
    const problem = await expectValidationProblem(await postRaw(server.base, server.key, "[".repeat(100_000) + "]".repeat(100_000)));
    expect(problem.errors).toEqual({ "[0]": ["Each record must be a JSON object. You sent an array."] });
  });

  test("rejects 1e400 as not finite", async () => {
    const body = JSON.stringify([asset(0, { startPoint: 0, endPoint: 1 })]).replace('"endPoint":1', '"endPoint":1e400');
    const problem = await expectValidationProblem(await postRaw(server.base, server.key, body));
    expect(problem.errors).toEqual({ "[0].endPoint": ["'End Point' must be a finite number."] });
  });

  test.each(["subareas", "assettypes", "assetcategories"])("validates %s records: id and name required", async (resource) => {
    const problem = await expectValidationProblem(await postJson(server.base, resource, server.key, [{ id: "x" }, { name: "y", description: 3 }]));
    expect(problem.errors).toEqual({
      "[0].name": ["'Name' must not be empty."],
      "[1].id": ["'Id' must not be empty."],
      "[1].description": ["'Description' must be a string. You sent a number."],
    });
  });

  test("rejects the NUL character in a text field, which PostgreSQL cannot store, on every backend", async () => {
    const problem = await expectValidationProblem(await postJson(server.base, "assets", server.key, [asset(0), asset(1, { name: "Main\u0000St" })]));
    expect(problem.errors).toEqual({ "[1].name": ["'Name' must not contain the NUL character (\\u0000). Remove it and send the batch again."] });
  });

  test("caps the error map at 1000 keys and says so in detail", async () => {
    const problem = await expectValidationProblem(await postJson(server.base, "assets", server.key, Array.from({ length: 1001 }, () => ({}))));
    expect(Object.keys(problem.errors)).toHaveLength(1000);
    expect(problem.errors["[0].id"]).toEqual(["'Id' must not be empty."]);
    expect(problem.detail).toBeString();
    // 1001 empty records have 7 missing fields each: 7007 messages, of which the first 1000 are shown.
    expect(problem.detail).toMatch(/\b1000\b/);
    expect(problem.detail).toMatch(/\b7007\b/);
  });

  test("a capped answer to a large bad batch stays small", async () => {
    const response = await postJson(server.base, "assets", server.key, Array.from({ length: 50_000 }, (_, index) => asset(index, { subAreaId: "" })));
    const text = await response.text();
    expect(response.status).toBe(400);
    expect(text.length).toBeLessThan(100_000);
  });
});

describe("a 400 is answered before queueing", () => {
  test("creates no job", async () => {
    const environment = await server.addEnvironment("validation-no-jobs");
    const listJobs = async () => {
      const response = await fetch(`${environment.base}/v2/jobs`, { headers: { "api-key": environment.key } });
      expect(response.status).toBe(200);
      return ((await response.json()) as { items: JobDocument[] }).items;
    };
    const bad: Array<[string, string | Uint8Array]> = [
      ["assets", JSON.stringify([asset(0, { subAreaId: "" })])],
      ["assets", JSON.stringify([asset(0), asset(1, { shapeType: "Circle" })])],
      ["assets", JSON.stringify(asset(0))],
      ["assets", "[]"],
      ["assets", "not json"],
      ["assets", new Uint8Array([0x5b, 0xff, 0x5d])],
      ["subareas", JSON.stringify([{ id: "north" }])],
      ["assettypes", JSON.stringify([{ id: "", name: "Pipe" }])],
      ["assetcategories", JSON.stringify({ id: "water", name: "Water" })],
    ];
    for (const [resource, body] of bad) {
      expect((await postRaw(environment.base, environment.key, body, resource)).status).toBe(400);
    }
    expect(await listJobs()).toEqual([]);

    // The same listing does show a job once a batch is accepted.
    const accepted = await postJson(environment.base, "subareas", environment.key, [{ id: "north", name: "North" }]);
    expect(accepted.status).toBe(202);
    expect((await listJobs()).map((job) => job.id)).toEqual([((await accepted.json()) as JobDocument).id]);
  });
});

describe("unknown fields", () => {
  test("are ignored: the record is accepted, applied and read back without them", async () => {
    const body = JSON.stringify([asset(0)]).replace(/^\[\{/, `[{"colour":"red","__proto__":{"isAdmin":true},"deep":${"[".repeat(100_000)}${"]".repeat(100_000)},`);
    const response = await postRaw(server.base, server.key, body);
    expect(response.status).toBe(202);
    const job = await waitForJob(server.base, server.key, ((await response.json()) as JobDocument).id);
    expect(job.importJobStatus).toBe("Succeeded");
    const read = await fetch(`${server.base}/v2/assets/${asset(0).id}`, { headers: { "api-key": server.key } });
    const record = (await read.json()) as Record<string, unknown>;
    expect(record).toMatchObject(asset(0));
    expect(record).not.toHaveProperty("colour");
    expect(record).not.toHaveProperty("deep");
    expect(Object.keys(record)).not.toContain("__proto__");
  });
});
