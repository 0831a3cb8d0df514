import { describe, expect, test } from "bun:test";
import { redactedUrl, withoutSecrets } from "../../src/store/postgres/url";

describe("redactedUrl: a database URL as every message shows it", () => {
  test("hides the password of the user part", () => {
    expect(redactedUrl("postgres://importd:secret@db.example:5432/importd")).toBe("postgres://importd:***@db.example:5432/importd");
  });

  test("hides ?password= and ?sslpassword=, in any case and encoding, and keeps every other parameter as written", () => {
    expect(redactedUrl("postgres://importd@db.example/importd?sslmode=verify-full&password=secret&sslrootcert=/etc/ca%20file.pem")).toBe(
      "postgres://importd@db.example/importd?sslmode=verify-full&password=***&sslrootcert=/etc/ca%20file.pem",
    );
    expect(redactedUrl("postgresql://u:secret@h/d?PASSWORD=secret&sslpassword=secret&pass%77ord=secret")).toBe("postgresql://u:***@h/d?PASSWORD=***&sslpassword=***&pass%77ord=***");
  });

  test("a URL without a password is shown as it is; one that cannot be parsed is not shown at all", () => {
    expect(redactedUrl("postgres://importd@db.example/importd?sslmode=require")).toBe("postgres://importd@db.example/importd?sslmode=require");
    expect(redactedUrl("postgres://u:secret@[::1/d")).toBe("(a database URL that cannot be parsed)");
  });
});

describe("withoutSecrets: a message that may repeat the URL or its password", () => {
  const url = "postgres://u:s%40cret@h/d?password=other-secret";
  test("shows the URL redacted and replaces each password, as written and decoded", () => {
    expect(withoutSecrets(`cannot parse ${url}`, url)).toBe("cannot parse postgres://u:***@h/d?password=***");
    expect(withoutSecrets("password s@cret or s%40cret or other-secret refused", url)).toBe("password *** or *** or *** refused");
  });

  test("leaves a message without them alone", () => {
    expect(withoutSecrets("connect ECONNREFUSED 127.0.0.1:5432", url)).toBe("connect ECONNREFUSED 127.0.0.1:5432");
  });
});
