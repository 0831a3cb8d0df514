import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { importAndWait, postJson } from "../helpers/api";
import { asset, seedReferenceData } from "../helpers/records";
import { startTestServer, type TestServer } from "../helpers/server";
import { until } from "../helpers/until";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
  await seedReferenceData(server.base, server.key);
});
afterAll(() => server.close());

const entries = (msg: string) => server.logs.filter((entry) => entry.msg === msg);

/** Reads one sample's value out of Prometheus text, e.g. sample(text, 'importd_jobs{state="Failed"}'). */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("request log", () => {
  test("one line per request: method, path, status, duration, environment and the job it created or named", async () => {
    const before = server.logs.length;
    const job = await importAndWait(server.base, "assets", server.key, [asset(1)]);
    const lines = server.logs.slice(before).filter((entry) => entry.msg === "request");

    const post = lines.find((entry) => entry.method === "POST")!;
    expect(post).toMatchObject({ level: "info", path: "/default/v2/assets", status: 202, environment: "default", jobId: job.id });
    expect(typeof post.durationMs).toBe("number");
    const polls = lines.filter((entry) => entry.method === "GET");
    expect(polls.length).toBeGreaterThan(0);
    for (const poll of polls) expect(poll).toMatchObject({ path: `/default/v2/status/${job.id}`, status: 200, environment: "default", jobId: job.id });
  });

  test("errors are logged with their status, and the path never carries the query", async () => {
    const before = server.logs.length;
    await fetch(`${server.base}/v2/jobs?limit=5&after=9`, { headers: { "api-key": "wrong_1" } });
    await fetch(`${server.url}/nowhere`);
    const lines = server.logs.slice(before).filter((entry) => entry.msg === "request");
    expect(lines).toEqual([
      expect.objectContaining({ method: "GET", path: "/default/v2/jobs", status: 401, environment: "default" }),
      expect.objectContaining({ method: "GET", path: "/nowhere", status: 404 }),
    ]);
  });

  test("never a key: neither a valid one nor a wrong one appears in any log entry", async () => {
    const wrong = `${"ab".repeat(32)}_1`;
    await postJson(server.base, "assets", wrong, [asset(2)]);
    await importAndWait(server.base, "assets", server.key, [asset(3)]);
    const everything = JSON.stringify(server.logs);
    expect(everything).not.toContain(server.key.split("_")[0]!);
    expect(everything).not.toContain(wrong.split("_")[0]!);
  });
});

describe("job log", () => {
  test("each transition is one entry: accepted, started, finished with type, records, duration and outcome", async () => {
    const job = await importAndWait(server.base, "assets", server.key, [asset(10), asset(11, { subAreaId: "nowhere" })]);
    expect(entries("job accepted").find((entry) => entry.jobId === job.id)).toMatchObject({ type: "Asset", records: 2, environment: "default" });
    expect(entries("job started").find((entry) => entry.jobId === job.id)).toMatchObject({ attempt: 1 });
    // Logged once the run's commit is answered to the scheduler: a poll may see the job terminal a moment before.
    await until(() => entries("job finished").some((entry) => entry.jobId === job.id), { what: `the log's "job finished" entry of job ${job.id}` });
    const finished = entries("job finished").filter((entry) => entry.jobId === job.id);
    expect(finished).toHaveLength(1);
    expect(finished[0]).toMatchObject({ type: "Asset", outcome: "PartiallySucceeded", records: 2, applied: 1, rejected: 1 });
    expect(typeof finished[0]!.durationMs).toBe("number");
  });
});

describe("health and readiness", () => {
  test("/healthz answers 200 without a key", async () => {
    const response = await fetch(`${server.url}/healthz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: "ok" });
  });

  test("/readyz answers 200 without a key once the database, the migrations and the workers are up", async () => {
    const response = await fetch(`${server.url}/readyz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      status: "ready",
      ready: true,
      checks: { database: true, migrations: true, workers: true, accepting: true },
    });
  });
});

describe("/metrics", () => {
  test("Prometheus text without a key: jobs by state, records applied and rejected, job durations, requests by status, queue depth", async () => {
    await importAndWait(server.base, "assets", server.key, [asset(20), asset(21, { assetTypeId: "nothing" }), asset(22)]);
    // Parked after the last import: nothing wakes the scheduler for it before the scrape.
    const other = await server.addEnvironment("metrics-env");
    await server.parkJob(other.slug);

    const response = await fetch(`${server.url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const text = await response.text();

    for (const name of ["importd_jobs", "importd_records_applied_total", "importd_records_rejected_total", "importd_job_duration_seconds", "importd_http_requests_total", "importd_queue_depth"]) {
      expect(text).toContain(`# TYPE ${name} `);
    }
    const jobs = (await (await fetch(`${server.base}/v2/jobs?limit=100`, { headers: { "api-key": server.key } })).json()) as { items: Array<{ importJobStatus: string }> };
    const succeeded = jobs.items.filter((job) => job.importJobStatus === "Succeeded").length;
    expect(sample(text, 'importd_jobs{state="Succeeded"}')).toBe(succeeded);
    expect(sample(text, 'importd_jobs{state="Pending"}')).toBe(1);
    // All environments together: no environment's name without a key (the test below turns them on).
    expect(sample(text, "importd_queue_depth")).toBe(1);
    expect(text).not.toContain("metrics-env");

    // Every job of this server so far, counted as the log counted them.
    const finished = entries("job finished");
    const sum = (type: string, field: "applied" | "rejected") =>
      finished.filter((entry) => entry.type === type).reduce((total, entry) => total + (entry[field] as number), 0);
    expect(sample(text, 'importd_records_applied_total{type="Asset"}')).toBe(sum("Asset", "applied"));
    expect(sample(text, 'importd_records_rejected_total{type="Asset"}')).toBe(sum("Asset", "rejected"));
    expect(sum("Asset", "rejected")).toBeGreaterThan(0);
    const partial = finished.filter((entry) => entry.type === "Asset" && entry.outcome === "PartiallySucceeded").length;
    expect(sample(text, 'importd_job_duration_seconds_count{type="Asset",status="PartiallySucceeded"}')).toBe(partial);
    expect(sample(text, 'importd_job_duration_seconds_bucket{le="+Inf",type="Asset",status="PartiallySucceeded"}')).toBe(partial);

    const posts202 = server.logs.filter((entry) => entry.msg === "request" && entry.method === "POST" && entry.status === 202).length;
    expect(sample(text, 'importd_http_requests_total{method="POST",status="202"}')).toBe(posts202);
  });

  test("with --metrics-environment-labels, the queue depth is told by environment", async () => {
    const labelled = await startTestServer({ metricsEnvironmentLabels: true });
    try {
      const other = await labelled.addEnvironment("labelled-env");
      await labelled.parkJob(other.slug);
      const text = await (await fetch(`${labelled.url}/metrics`)).text();
      expect(sample(text, 'importd_queue_depth{environment="labelled-env"}')).toBe(1);
      expect(sample(text, 'importd_queue_depth{environment="default"}')).toBe(0);
      expect(sample(text, "importd_queue_depth")).toBeUndefined();
    } finally {
      await labelled.close();
    }
  });
});
