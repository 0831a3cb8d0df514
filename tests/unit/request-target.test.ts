import { expect, test } from "bun:test";
import { pathOf, routable } from "../../src/http/request-target";

test("pathOf: the path of a request URL, without query or fragment, as new URL() would give it", () => {
  for (const url of ["http://127.0.0.1:8080/default/v2/status/3?api-key=secret", "http://localhost/", "http://localhost", "http://h:1/p?", "http://h/a/b#frag", "http://h/default/v2/assets"]) {
    expect(pathOf(url)).toBe(new URL(url).pathname);
  }
});

test("pathOf: a URL that is only a path (no Host header) is its own path, without the query", () => {
  expect(pathOf("/healthz")).toBe("/healthz");
  expect(pathOf("/default/v2/jobs?limit=3")).toBe("/default/v2/jobs");
  expect(pathOf("//x//y")).toBe("//x//y");
});

test("routable: a path-only request (no Host header) gets an absolute URL and keeps its method, headers and body", async () => {
  const pathOnly = { url: "/default/v2/assets?x=1", method: "POST", headers: new Headers({ "api-key": "k_1" }), body: "[1]" } as unknown as Request;
  const made = routable(pathOnly);
  expect(pathOf(made.url)).toBe("/default/v2/assets");
  expect(made.url.endsWith("/default/v2/assets?x=1")).toBe(true);
  expect(made.method).toBe("POST");
  expect(made.headers.get("api-key")).toBe("k_1");
  expect(await made.text()).toBe("[1]");
});

test("routable: a request whose host is long enough for the router goes on as it is, over http:// and https://", () => {
  for (const url of ["http://abcd/healthz", "http://127.0.0.1:8080/default/v2/jobs", "https://abc/healthz", "https://localhost:8443/default/v2/assets?x=1"]) {
    const request = new Request(url);
    expect(routable(request)).toBe(request);
  }
});

test("routable: a host too short for the router (Host: a) gets a longer one, where the router looks for the path; method, headers and body kept", async () => {
  for (const url of ["http://a/default/v2/assets?x=1", "http://a:1/default/v2/assets?x=1", "https://ab/default/v2/assets?x=1"]) {
    const made = routable(new Request(url, { method: "POST", headers: { "api-key": "k_1" }, body: "[1]" }));
    expect(made.url).toBe("http://importd/default/v2/assets?x=1");
    expect(made.url.indexOf("/", 11)).toBe(made.url.indexOf("/default"));
    expect([made.method, made.headers.get("api-key"), await made.text()]).toEqual(["POST", "k_1", "[1]"]);
  }
});
