// The third pass of `npm test`: the HTTP, job, client, OpenAPI and webhook tests again, with every test server serving HTTPS on
// loopback (TEST_TRANSPORT=tls; see tests/helpers/backend.ts), so that nothing works only over plain HTTP. The
// certificate is made for this run by an authority of the tests' own, which the test process trusts
// (NODE_EXTRA_CA_CERTS, read by Bun at start: hence a process of its own).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testAuthority, writeIdentity } from "./helpers/tls";

const suites = ["tests/http", "tests/jobs", "tests/client", "tests/openapi", "tests/webhooks", "tests/console"];

const dir = mkdtempSync(join(tmpdir(), "importd-tls-pass-"));
try {
  const authority = await testAuthority("TLS pass");
  const ca = join(dir, "ca.crt");
  writeFileSync(ca, authority.cert);
  const { cert, key } = writeIdentity(dir, await authority.issue(["localhost", "127.0.0.1"]));
  const proc = Bun.spawn([process.execPath, "test", "--timeout", "30000", ...suites, ...process.argv.slice(2)], {
    cwd: `${import.meta.dir}/..`,
    env: { ...process.env, TEST_TRANSPORT: "tls", TEST_TLS_CERT: cert, TEST_TLS_KEY: key, NODE_EXTRA_CA_CERTS: ca },
    stdio: ["inherit", "inherit", "inherit"],
  });
  process.exitCode = await proc.exited;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
