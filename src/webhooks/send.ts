import { STATUS_CODES } from "node:http";
import { isIP } from "node:net";
import { checkServerIdentity } from "node:tls";
import { Webhook } from "standardwebhooks";
import type { AllowList } from "../net/allow-list";
import { checkUrl, type Lookup, resolveDestination } from "./destinations";

/**
 * One delivery attempt of one webhook (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature). Retries,
 * backoff and what an attempt means for the subscription are the dispatcher's; this only sends and tells what
 * happened. It never throws: every failure, ours or the receiver's, is an Attempt.
 */

export type Attempt = {
  /** The receiver answered 2xx within the time limit. */
  delivered: boolean;
  status?: number;
  /** Why it was not delivered, for people (the deliveries listing, the ping's answer). */
  error?: string;
  /** A destination refused after DNS: what the name resolved to, for the server's log only (destinations.ts, Refusal). */
  resolved?: string;
  durationMs: number;
  /** The receiver answered 410 Gone: it wants no more webhooks (the subscription is disabled). */
  gone: boolean;
  /** When the attempt started, ISO 8601. */
  at: string;
};

export type SendOptions = {
  url: string;
  /** The event's webhook-id: the same across retries, so that receivers can drop duplicates. */
  messageId: string;
  body: string;
  /** The subscription's signing secret, `whsec_<base64>`. */
  secret: string;
  allow: AllowList;
  /** The limit on the whole attempt: DNS, connecting, the answer's headers and the part of its body that is read. */
  timeoutMs?: number;
  now?: () => Date;
  lookup?: Lookup;
  /** The certificate authority (PEM) to trust for https receivers instead of the system's (tests). */
  ca?: string;
};

export const defaultTimeoutMs = 10_000;
/**
 * How much of the answer's body is read (to know that it ended in time), then dropped: the body is never stored nor
 * shown, or a subscriber could read through importd what a service the operator allowed answers (DECISIONS 15). A
 * receiver that answers megabytes costs no more than this.
 */
export const maxResponseBytes = 1024;

// Failures that happen before anything was sent: another address of the same name may still answer.
const notConnected = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL"]);

const seconds = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`);
const statusLine = (status: number) => `${status} ${STATUS_CODES[status] ?? ""}`.trim();
const errorCode = (error: unknown) => (error as { code?: string } | undefined)?.code;

/** A fetch failure in words a receiver's owner can act on. */
function describeFetchError(error: unknown, serverName: string): string {
  const code = errorCode(error);
  const message = (error as Error | undefined)?.message ?? String(error);
  switch (code) {
    case "ECONNREFUSED":
      return "connection refused: nothing listens at that address and port";
    case "ECONNRESET":
      return "the connection was closed before an answer came";
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return "no route to the receiver's address";
    case "EPROTO":
      return "the TLS handshake failed: does the receiver speak https on that port?";
    case "ERR_TLS_CERT_ALTNAME_INVALID":
      return `its TLS certificate is not for ${serverName} (${message})`;
    case "CERT_HAS_EXPIRED":
      return "its TLS certificate has expired";
    case "DEPTH_ZERO_SELF_SIGNED_CERT":
    case "SELF_SIGNED_CERT_IN_CHAIN":
    case "UNABLE_TO_GET_ISSUER_CERT":
    case "UNABLE_TO_GET_ISSUER_CERT_LOCALLY":
    case "UNABLE_TO_VERIFY_LEAF_SIGNATURE":
      return `its TLS certificate is not signed by an authority this server trusts (${code})`;
    default:
      return code !== undefined && !message.includes(code) ? `${code}: ${message}` : message;
  }
}

/** Rejects with the signal's reason when it aborts, so that a step that takes no signal (DNS) still ends in time. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/**
 * Reads at most `maxResponseBytes` of a body and drops them, then cancels the rest. A body that stalls ends when the
 * fetch's signal aborts (it errors the stream): that error is answered.
 */
async function readStart(body: ReadableStream<Uint8Array> | null): Promise<{ error?: unknown }> {
  if (body === null) return {};
  const reader = body.getReader();
  let size = 0;
  try {
    while (size < maxResponseBytes) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
    }
    return {};
  } catch (error) {
    return { error };
  } finally {
    reader.cancel().catch(() => {});
  }
}

export async function sendWebhook(options: SendOptions): Promise<Attempt> {
  const startedAt = (options.now ?? (() => new Date()))();
  const started = performance.now();
  const timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
  const attempt = (fields: Partial<Attempt>): Attempt => ({
    delivered: false,
    gone: false,
    ...fields,
    durationMs: Math.round(performance.now() - started),
    at: startedAt.toISOString(),
  });

  const checked = checkUrl(options.url, options.allow);
  if (!checked.ok) return attempt({ error: checked.reason });
  const url = checked.url;

  let signature: string;
  try {
    signature = new Webhook(options.secret).sign(options.messageId, startedAt, options.body);
  } catch (error) {
    return attempt({ error: `the subscription's signing secret cannot sign (${(error as Error).message}): it should be whsec_ and base64` });
  }

  const signal = AbortSignal.timeout(timeoutMs);
  const host = url.hostname.replace(/\.$/, "");
  let phase: "resolving" | "waiting" = "resolving";
  try {
    const destination = await untilAborted(resolveDestination(url, options.allow, options.lookup), signal);
    if (!destination.ok) return attempt({ error: destination.reason, resolved: destination.resolved });
    phase = "waiting";

    const headers: Record<string, string> = {
      "content-type": "application/json",
      "user-agent": "importd-webhooks",
      "webhook-id": options.messageId,
      "webhook-timestamp": String(Math.floor(startedAt.getTime() / 1000)),
      "webhook-signature": signature,
    };
    const isLiteral = isIP(url.hostname.replace(/^\[(.*)\]$/, "$1")) !== 0;
    const init: BunFetchRequestInit = { method: "POST", body: options.body, headers, redirect: "manual", signal };
    if (!isLiteral) {
      // Connect to the address that was checked, never to the name resolved anew: between our lookup and the
      // connection's, DNS could answer another address (DNS rebinding). The name still goes in the Host header, in
      // SNI, and is what the certificate must name.
      headers.host = url.host;
      if (url.protocol === "https:") {
        // A request with its own checkServerIdentity gets a connection of its own (Bun closes it afterwards), so the
        // certificate is checked against this name on every delivery, never skipped by reusing another name's connection.
        init.tls = { serverName: host, checkServerIdentity: (_name, certificate) => checkServerIdentity(host, certificate) };
      }
    }
    if (options.ca !== undefined) init.tls = { ...init.tls, ca: options.ca };

    let response: Response | undefined;
    for (const [index, { address, family }] of destination.addresses.entries()) {
      const target = isLiteral ? url.href : `${url.protocol}//${family === 6 ? `[${address}]` : address}${url.port === "" ? "" : `:${url.port}`}${url.pathname}${url.search}`;
      try {
        response = await fetch(target, init);
        break;
      } catch (error) {
        if (!notConnected.has(errorCode(error) ?? "") || index === destination.addresses.length - 1) throw error;
      }
    }
    const status = response!.status;
    const { error: bodyError } = await readStart(response!.body);
    const answered = `answered ${statusLine(status)}`;
    if (bodyError !== undefined) {
      const why = signal.aborted ? `its body did not end within ${seconds(timeoutMs)}` : `its body broke off (${describeFetchError(bodyError, host)})`;
      return attempt({ status, error: `${answered}, but ${why}` });
    }
    if (status >= 200 && status < 300) return attempt({ delivered: true, status });
    const location = response!.headers.get("location");
    if (status >= 300 && status < 400 && location !== null) {
      let target = location;
      try {
        target = new URL(location, url).href;
      } catch {}
      return attempt({ status, error: `redirected to ${target}: redirects are not followed` });
    }
    return attempt({ status, gone: status === 410, error: answered });
  } catch (error) {
    if (signal.aborted) {
      return attempt({ error: phase === "resolving" ? `looking up ${host} took longer than ${seconds(timeoutMs)}` : `no answer within ${seconds(timeoutMs)}` });
    }
    return attempt({ error: describeFetchError(error, host) });
  }
}
