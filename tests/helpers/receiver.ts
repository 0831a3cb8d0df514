import type { Server } from "bun";
import { Webhook } from "standardwebhooks";

/** One message a receiver got: its headers, its body, and whether its signature checked out with the secret given. */
export type Received = { id: string; timestamp: string; body: { type: string; timestamp: string; data: Record<string, unknown> }; raw: string; verified: boolean; path: string };

/**
 * A webhook receiver in the test process, as a subscriber would run one: every message's signature is checked with
 * the standardwebhooks package, the one receivers use. `answer` decides each reply (200 by default); the receiver
 * can go away (its port closed: connections refused) and come back on the same port.
 */
export class Receiver {
  readonly received: Received[] = [];
  /** The secret to check signatures with; `secrets` by path, for several subscriptions on one receiver. */
  secret: string | undefined;
  readonly secrets = new Map<string, string>();
  answer: (request: Request, received: Received | undefined) => Response | Promise<Response> = () => new Response("thanks");
  private server: Server<undefined> | undefined;
  private waiters: Array<() => void> = [];
  port = 0;

  static async start(): Promise<Receiver> {
    const receiver = new Receiver();
    receiver.up();
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  up(): void {
    this.server = Bun.serve({
      port: this.port,
      hostname: "127.0.0.1",
      fetch: async (request) => {
        const raw = await request.text();
        const headers = Object.fromEntries(request.headers);
        let received: Received | undefined;
        if (headers["webhook-id"]) {
          let verified = false;
          const path = new URL(request.url).pathname;
          try {
            new Webhook(this.secrets.get(path) ?? this.secret ?? "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA").verify(raw, headers);
            verified = true;
          } catch {
            // Recorded as not verified: the test says what it expects.
          }
          received = { id: headers["webhook-id"]!, timestamp: headers["webhook-timestamp"]!, body: JSON.parse(raw), raw, verified, path };
          this.received.push(received);
          for (const wake of this.waiters.splice(0)) wake();
        }
        return this.answer(request, received);
      },
    });
    this.port = this.server.port!;
  }

  /** Closes the port: deliveries meanwhile are refused connections. */
  async down(): Promise<void> {
    await this.server?.stop(true);
    this.server = undefined;
  }

  /** Waits until `count` messages matching `match` have arrived (or fails after `timeoutMs`). */
  async waitFor(count: number, match: (message: Received) => boolean = () => true, timeoutMs = 20_000): Promise<Received[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.received.filter(match);
      if (found.length >= count) return found;
      if (Date.now() > deadline) throw new Error(`${found.length} of ${count} webhook messages arrived within ${timeoutMs} ms: ${JSON.stringify(this.received.map((message) => message.body.type))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
        this.waiters.push(() => (clearTimeout(timer), resolve()));
      });
    }
  }

  async stop(): Promise<void> {
    await this.down();
  }
}
