import { expect, test } from "bun:test";
import { pathOf } from "../../src/observability/requests";

test("pathOf: the path of a request URL, without query or fragment, as new URL() would give it", () => {
  for (const url of ["http://127.0.0.1:8080/default/v2/status/3?api-key=secret", "http://localhost/", "http://localhost", "http://h:1/p?", "http://h/a/b#frag", "http://h/default/v2/assets"]) {
    expect(pathOf(url)).toBe(new URL(url).pathname);
  }
});
