import { afterAll, beforeAll, expect, test } from "bun:test";
import { parseWebhookAllow } from "../../src/net/allow-list";
import { importd } from "../helpers/process";
import { Receiver } from "../helpers/receiver";
import { startTestServer, type TestServer } from "../helpers/server";

// `importd webhook add|list|test|remove`: the real command against a real server and a real receiver.

let server: TestServer;
let receiver: Receiver;
beforeAll(async () => {
  receiver = await Receiver.start();
  server = await startTestServer({ webhookAllow: parseWebhookAllow("127.0.0.1/32") });
});
afterAll(async () => {
  await server.close();
  await receiver.stop();
});

const webhook = (...args: string[]) => importd(["webhook", ...args, "--base-url", server.base], { IMPORTD_API_KEY: server.key });

test("add prints the subscription and its secret once; list shows it; test sends a signed ping; remove removes it", async () => {
  const added = await webhook("add", `${receiver.url}/cli`, "--events", "job.failed,job.canceled");
  expect(added.code).toBe(0);
  const [first, second] = added.stdout.trim().split("\n");
  const id = Number(/^webhook (\d+): /.exec(first!)![1]);
  expect(first).toBe(`webhook ${id}: ${receiver.url}/cli (job.failed, job.canceled)`);
  const secret = /^signing secret, shown only this once: (whsec_\S+)$/.exec(second!)![1]!;
  receiver.secret = secret;

  const listed = await webhook("list");
  expect(listed).toMatchObject({ code: 0, stdout: `${id}\tjob.failed,job.canceled\t${receiver.url}/cli\n` });
  expect(listed.stdout).not.toContain(secret);

  const tested = await webhook("test", String(id));
  expect(tested.code).toBe(0);
  expect(tested.stdout).toMatch(/^delivered: 200, in \d+ ms \(webhook-id msg_[0-9a-f]{32}\)\n$/);
  const [ping] = await receiver.waitFor(1, (message) => message.body.type === "ping");
  expect(ping!.verified).toBe(true);

  expect(await webhook("remove", String(id))).toMatchObject({ code: 0, stdout: `removed webhook ${id}\n` });
  const again = await webhook("remove", String(id));
  expect(again.code).toBe(1);
  expect(again.stderr).toContain(`importd: webhook ${id} was not found`);
}, 60_000);

test("a URL the server refuses, a bad event, a wrong key: one line each, with the reason", async () => {
  const refused = await webhook("add", "http://10.1.2.3/hook");
  expect(refused.code).toBe(1);
  expect(refused.stderr).toStartWith("importd: the server refused the subscription: http://10.1.2.3 is not allowed");
  const badEvent = await webhook("add", `${receiver.url}/x`, "--events", "job.exploded");
  expect(badEvent.code).toBe(2);
  expect(badEvent.stderr).toContain("--events: job.exploded is not an event; the events are job.succeeded, job.partially_succeeded, job.failed, job.canceled");
  const wrongKey = await importd(["webhook", "list", "--base-url", server.base], { IMPORTD_API_KEY: "wrong_1" });
  expect(wrongKey.code).toBe(2);
  expect(wrongKey.stderr).toContain("the server refused the API key (401)");
  const help = await importd(["webhook", "--help"]);
  expect(help.stdout).toContain("importd webhook add <url> [--events <event,…>]");
}, 60_000);
