import { parseArgs } from "node:util";
import { createClient, ImportdConnectionError, ImportdProblem, type Webhook } from "../client";
import { webhookEvents } from "../webhooks/events";
import { UsageError, type Output } from "./errors";
import { connectionFlags, connectionUsage, keyRefused, serverConnection } from "./server-connection";

export const webhookUsage = `importd webhook: an environment's webhook subscriptions, on a running server, through its API

  importd webhook add <url> [--events <event,…>]
  importd webhook list
  importd webhook test <id>
  importd webhook remove <id>
  each with --base-url <url> [--api-key <key>] [--ca-file <file>]

webhook add <url>     subscribes the URL to the environment's job events and prints the subscription and its signing
                      secret, which is shown only this once: give it to the receiver, which checks each message's
                      signature with it (Standard Webhooks). The server's operator must allow the URL
                      (importd serve --webhook-allow); otherwise the server says why it refuses it.
  --events <list>       comma-separated, any of ${webhookEvents.join(", ")} (default: all)
webhook list          the subscriptions: id, events, URL, and whether one was disabled (its receiver answered 410 Gone)
webhook test <id>     sends a signed ping to the subscription now and prints what its receiver answered
webhook remove <id>   removes the subscription; its deliveries not yet made are canceled

${connectionUsage}

  Exit code: 0 done (webhook test: the ping was delivered); 1 no such subscription, a URL the server refuses, or a
  ping not delivered; 2 usage or connection errors, a refused key included.`;

const subcommands = ["add", "list", "test", "remove"] as const;
type Subcommand = (typeof subcommands)[number];

/** `importd webhook`: subscriptions through the API, as `importd jobs` reads jobs. */
export async function webhookCommand(argv: string[], env: Record<string, string | undefined>, io: Output): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...connectionFlags, events: { type: "string" }, help: { type: "boolean", short: "h" } },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) return io.out(webhookUsage), 0;
  const [action, ...rest] = positionals;
  if (!subcommands.includes(action as Subcommand)) {
    throw new UsageError(`${action ? `unknown webhook command '${action}'` : "missing a webhook command"}: use webhook add <url>, webhook list, webhook test <id> or webhook remove <id>`);
  }
  if (values.events !== undefined && action !== "add") throw new UsageError(`--events is a flag of webhook add only`);
  const argument = (what: string) => {
    if (rest.length !== 1) throw new UsageError(`webhook ${action} takes one ${what}${rest.length > 1 ? `, not '${rest.join(" ")}'` : ""}`);
    return rest[0]!;
  };
  const id = (text: string) => {
    if (!/^[1-9][0-9]{0,9}$/.test(text)) throw new UsageError(`webhook ${action} takes a subscription id (a positive whole number; see importd webhook list), not '${text}'`);
    return Number(text);
  };
  const events = values.events?.split(",").map((event) => event.trim()).filter(Boolean);
  const unknown = events?.filter((event) => !webhookEvents.includes(event as never));
  if (unknown && unknown.length > 0) throw new UsageError(`--events: ${unknown.join(", ")} ${unknown.length === 1 ? "is not an event" : "are not events"}; the events are ${webhookEvents.join(", ")}`);
  if (action === "list" && rest.length > 0) throw new UsageError(`webhook list takes no arguments, got '${rest.join(" ")}'`);
  const target = action === "add" ? argument("URL") : action === "list" ? undefined : id(argument("subscription id"));
  const connection = serverConnection(values, env);
  const client = createClient({ ...connection, retries: 2 });

  try {
    if (action === "add") {
      const created = await client.createWebhook(target as string, events);
      io.out(`webhook ${created.id}: ${created.url} (${created.events.join(", ")})`);
      io.out(`signing secret, shown only this once: ${created.secret}`);
      io.err("Give the secret to the receiver: it checks each message's webhook-signature with it (any Standard Webhooks library does).");
      return 0;
    }
    if (action === "list") {
      const webhooks = await client.listWebhooks();
      for (const webhook of webhooks) io.out(listed(webhook));
      if (webhooks.length === 0) io.err("No webhook subscriptions in this environment: importd webhook add <url> makes one.");
      return 0;
    }
    if (action === "test") {
      const ping = await client.testWebhook(target as number);
      const answer = ping.status === null ? ping.error : `${ping.status}${ping.error ? ` (${ping.error})` : ""}`;
      (ping.delivered ? io.out : io.err)(`${ping.delivered ? "delivered" : "not delivered"}: ${answer}, in ${ping.durationMs} ms (webhook-id ${ping.messageId})`);
      return ping.delivered ? 0 : 1;
    }
    await client.removeWebhook(target as number);
    io.out(`removed webhook ${target}`);
    return 0;
  } catch (error) {
    if (error instanceof ImportdConnectionError) return io.err(`importd: ${error.message}`), 2;
    if (!(error instanceof ImportdProblem)) throw error;
    if (error.status === 401) return io.err(`importd: ${keyRefused(connection.baseUrl)}`), 2;
    if (error.status === 404) return io.err(`importd: webhook ${target} was not found: ${error.detail}`), 1;
    if (error.status === 422 || error.status === 400) return io.err(`importd: the server refused the subscription: ${Object.values(error.errors ?? {}).flat().join(" ") || error.detail}`), 1;
    return io.err(`importd: ${error.status} ${error.title}${error.detail ? `: ${error.detail}` : ""}`), 2;
  }
}

/** One subscription on one line: id, events, URL, and why it is disabled if it is. */
const listed = (webhook: Webhook) =>
  `${webhook.id}\t${webhook.events.join(",")}\t${webhook.url}${webhook.disabledAt ? `\tdisabled ${webhook.disabledAt}: ${webhook.disabledReason}` : ""}`;
