import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { request } from "node:https";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { importBatch, postJson, waitForJob, type Trust } from "../helpers/api";
import { haproxyBinary, serverStates } from "../helpers/haproxy";
import { freePort } from "../helpers/net";
import { projectRoot, spawnServer, type ServerProcess } from "../helpers/process";
import { tempDir } from "../helpers/server";
import { testAuthority } from "../helpers/tls";

// deploy/haproxy.cfg, as shipped, in front of a real importd: the README walk-through goes through it, over
// HTTPS to HAProxy (TLS at the proxy, with a certificate of the tests' own authority), and importd sees the
// client's address, not HAProxy's. HAProxy listens on 127.0.0.1 and reaches importd from 127.0.0.1 (the only
// trusted proxy); the clients that must be told apart connect from 127.0.0.2 and 127.0.0.3 (all of 127.0.0.0/8
// is loopback on Linux).

const haproxy = haproxyBinary;
const authFailuresPerMinute = 3;

if (!haproxy) {
  // CI installs it (.ci/run); there, a missing haproxy must fail, not pass unnoticed.
  if (process.env.CI) {
    test("haproxy is installed (CI is set: .ci/run installs it from Debian's packages)", () => {
      throw new Error("haproxy is not installed (looked on PATH and in /usr/sbin): apt-get install haproxy");
    });
  } else {
    console.log("tests/deploy/haproxy.test.ts SKIPPED: haproxy is not installed (apt-get install haproxy); CI runs it.");
  }
}

type Answer = { status: number; contentType: string | undefined; body: string };

/** A request through HAProxy from a chosen loopback address (fetch cannot choose its source address). */
const requestFrom = (localAddress: string, url: string, headers: Record<string, string>, ca: string) =>
  new Promise<Answer>((resolve, reject) => {
    const outgoing = request(url, { localAddress, headers, agent: false, ca }, (response) => {
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk) => (body += chunk));
      response.on("end", () => resolve({ status: response.statusCode!, contentType: response.headers["content-type"], body }));
    });
    outgoing.on("error", reject);
    outgoing.end();
  });

describe.skipIf(!haproxy)("importd behind deploy/haproxy.cfg", () => {
  const dataDir = tempDir("importd-haproxy-");
  const statsSocket = join(dataDir, "haproxy.sock");
  let server: ServerProcess;
  let proxy: Subprocess<"ignore", "pipe", "pipe">;
  let proxyOutput: Promise<string>;
  let key: string;
  let proxyUrl: string;
  let base: string;
  let trust: Trust & { tls: { ca: string } };

  beforeAll(async () => {
    const authority = await testAuthority("HAProxy");
    trust = { tls: { ca: authority.cert } };
    const issued = await authority.issue(["127.0.0.1", "localhost"]);
    const certificate = join(dataDir, "haproxy.pem");
    writeFileSync(certificate, issued.cert + issued.key);
    server = await spawnServer(join(dataDir, "data"), ["--workers", "1", "--trusted-proxies", "127.0.0.1/32", "--auth-failures-per-minute", String(authFailuresPerMinute)]);
    key = server.firstRunKey!;
    const port = await freePort();
    proxyUrl = `https://127.0.0.1:${port}`;
    base = `${proxyUrl}/default`;
    proxy = Bun.spawn([haproxy!, "-db", "-f", "deploy/haproxy.cfg"], {
      cwd: projectRoot,
      env: {
        ...process.env,
        PROXY_LISTEN: `127.0.0.1:${port}`,
        PROXY_CERTIFICATE: certificate,
        PROXY_UPSTREAM: new URL(server.url).host,
        PROXY_STATS_SOCKET: statsSocket,
        PROXY_LOG: "stdout",
        PROXY_KEEP_USER: "1",
      },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    proxyOutput = Promise.all([new Response(proxy.stdout).text(), new Response(proxy.stderr).text()]).then((parts) => parts.join(""));
    // UP with a passing last check means HAProxy's own GET /readyz got its 200.
    const deadline = Date.now() + 20_000;
    for (;;) {
      const state = await serverStates(statsSocket).then((states) => states.importd1, () => undefined);
      if (state?.status === "UP" && state.check === "L7OK") break;
      if (proxy.exitCode !== null || Date.now() > deadline) {
        proxy.kill("SIGKILL");
        throw new Error(`HAProxy did not report importd UP (last state ${JSON.stringify(state)}):\n${await proxyOutput}`);
      }
      await Bun.sleep(100);
    }
  }, 40_000);

  afterAll(async () => {
    proxy?.kill("SIGKILL");
    server?.proc.kill("SIGKILL");
    await Promise.all([proxy?.exited, server?.proc.exited]);
    rmSync(dataDir, { recursive: true, force: true });
  });

  test("the README walk-through gives the README's answers through HAProxy", async () => {
    // 1. Reference data first.
    for (const [resource, records] of [
      ["subareas", [{ id: "north", name: "North district" }, { id: "south", name: "South district" }]],
      ["assettypes", [{ id: "pipe", name: "Pipe" }, { id: "valve", name: "Valve" }]],
      ["assetcategories", [{ id: "water", name: "Water network" }]],
    ] as const) {
      const job = await importBatch(base, resource, key, [...records], trust);
      expect(job.importJobStatus).toMatch(/^(Pending|Processing|Succeeded)$/);
    }

    // 2. Assets, with the Location of their job.
    const posted = await postJson(
      base,
      "assets",
      key,
      [
      {
        id: "PIPE-0001", subAreaId: "north", name: "Main St water main", status: "ACT", assetCategoryId: "water", assetTypeId: "pipe", shapeType: "LineString", startPoint: 0, endPoint: 120.5,
        geolocation: { linearReferenceStart: "MAIN-ST", linearReferenceEnd: "MAIN-ST", locationStart: 0, locationEnd: 120.5, locationUnit: "m" },
      },
      { id: "VALVE-0001", subAreaId: "south", name: "Valve at Mill Rd", status: "ACT", assetCategoryId: "water", assetTypeId: "valve", shapeType: "Point" },
      ],
      {},
      trust,
    );
    expect(posted.status).toBe(202);
    const accepted = (await posted.json()) as { id: number };
    expect(posted.headers.get("location")).toBe(`/default/v2/status/${accepted.id}`);

    // 3. Poll to Succeeded, then read it back.
    const succeeded = await waitForJob(base, key, accepted.id, 60_000, trust);
    expect(succeeded.importJobStatus).toBe("Succeeded");
    expect(succeeded.output).toMatchObject({ message: "All 2 records were applied (2 created, 0 updated, 0 unchanged).", total: 2, applied: 2, rejected: 0, errors: [], created: 2, updated: 0, unchanged: 0 });
    const pipe = await fetch(`${base}/v2/assets/PIPE-0001`, { headers: { "api-key": key }, ...trust } as RequestInit);
    expect(pipe.status).toBe(200);
    expect(await pipe.json()).toMatchObject({ id: "PIPE-0001", name: "Main St water main", endPoint: 120.5 });

    // 4. PartiallySucceeded: an unknown sub area, an unknown asset type, one fine record.
    const partial = await waitForJob(base, key, (await importBatch(base, "assets", key, [
      { id: "PIPE-0002", subAreaId: "north", name: "Oak Ave main", status: "ACT", assetCategoryId: "water", assetTypeId: "pipe", shapeType: "LineString" },
      { id: "PIPE-0003", subAreaId: "west", name: "Elm St main", status: "ACT", assetCategoryId: "water", assetTypeId: "pipe", shapeType: "LineString" },
      { id: "HYD-0001", subAreaId: "south", name: "Hydrant 1", status: "ACT", assetCategoryId: "water", assetTypeId: "hydrant", shapeType: "Point" },
    ], trust)).id, 60_000, trust);
    expect(partial.importJobStatus).toBe("PartiallySucceeded");
    expect(partial.output).toMatchObject({ total: 3, applied: 1, rejected: 2 });
    expect(partial.output!.message).toStartWith("2 of 3 records were rejected and 1 applied (1 created, 0 updated, 0 unchanged).");
    expect(partial.output!.errors.map(({ index, id, field }) => ({ index, id, field }))).toEqual([
      { index: 1, id: "PIPE-0003", field: "subAreaId" },
      { index: 2, id: "HYD-0001", field: "assetTypeId" },
    ]);
    expect((await fetch(`${base}/v2/assets/PIPE-0002`, { headers: { "api-key": key }, ...trust } as RequestInit)).status).toBe(200);
    expect((await fetch(`${base}/v2/assets/PIPE-0003`, { headers: { "api-key": key }, ...trust } as RequestInit)).status).toBe(404);

    // 5. Failed: the same id twice, nothing applied.
    const failed = await waitForJob(base, key, (await importBatch(base, "assets", key, [
      { id: "PIPE-0004", subAreaId: "north", name: "Birch Rd main", status: "ACT", assetCategoryId: "water", assetTypeId: "pipe", shapeType: "LineString" },
      { id: "PIPE-0004", subAreaId: "north", name: "Birch Rd main (again)", status: "ACT", assetCategoryId: "water", assetTypeId: "pipe", shapeType: "LineString" },
    ], trust)).id, 60_000, trust);
    expect(failed.importJobStatus).toBe("Failed");
    expect(failed.output).toMatchObject({ total: 2, applied: 0, rejected: 2 });
    expect(failed.output!.message).toContain("'PIPE-0004' at [0], [1]");
    expect((await fetch(`${base}/v2/assets/PIPE-0004`, { headers: { "api-key": key }, ...trust } as RequestInit)).status).toBe(404);

    // 6. Refused at once: 400 Problem Details naming each field.
    const refused = await postJson(base, "assets", key, [
      { id: "PIPE-0005", subAreaId: "", name: "Ash St main", status: "ACT", assetCategoryId: "water", assetTypeId: "pipe", shapeType: "Line" },
    ], {}, trust);
    expect(refused.status).toBe(400);
    expect(refused.headers.get("content-type")).toBe("application/problem+json");
    const problem = await refused.json();
    expect(problem.errors["[0].subAreaId"]).toEqual(["'Sub Area Id' must not be empty."]);
    expect(problem.errors["[0].shapeType"][0]).toStartWith("'Shape Type' must be one of:");
  });

  test("wrong keys from one client behind HAProxy do not lock out another client", async () => {
    // Both clients reach importd from HAProxy's address; only X-Forwarded-For tells them apart.
    const wrong = { "api-key": `${"0".repeat(64)}_1` };
    const statuses: number[] = [];
    for (let i = 0; i <= authFailuresPerMinute; i++) statuses.push((await requestFrom("127.0.0.2", `${base}/v2/jobs`, wrong, trust.tls.ca)).status);
    expect(statuses).toEqual([...Array(authFailuresPerMinute).fill(401), 429]);
    expect((await requestFrom("127.0.0.3", `${base}/v2/jobs`, wrong, trust.tls.ca)).status).toBe(401);
    expect((await requestFrom("127.0.0.3", `${base}/v2/jobs`, { "api-key": key }, trust.tls.ca)).status).toBe(200);
  });

  test("importd logs the client's address, not HAProxy's, and not a forged X-Forwarded-For", async () => {
    const marker = 424242;
    const answer = await requestFrom("127.0.0.4", `${base}/v2/status/${marker}`, { "api-key": key, "x-forwarded-for": "203.0.113.9" }, trust.tls.ca);
    expect(answer.status).toBe(404);

    // The log is read once the server has exited (its stderr is complete then).
    server.proc.kill("SIGTERM");
    await server.proc.exited;
    const lines = (await server.stderr).split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line));
    const logged = lines.find((line) => line.msg === "request" && line.jobId === marker);
    expect(logged).toMatchObject({ path: `/default/v2/status/${marker}`, status: 404, client: "127.0.0.4" });
  });

  test("with importd gone, HAProxy's own answer is Problem Details too", async () => {
    server.proc.kill("SIGTERM");
    await server.proc.exited;
    const unavailable = await fetch(`${proxyUrl}/healthz`, trust as RequestInit);
    expect(unavailable.status).toBe(503);
    expect(unavailable.headers.get("content-type")).toBe("application/problem+json");
    expect(await unavailable.json()).toMatchObject({ status: 503, title: "Service Unavailable" });
  });
});
