/**
 * Long polls held open on a server (`Prefer: wait`), for row 4's second figure: raw sockets, because fetch caps
 * the requests it keeps in flight at a time far below 2,000.
 */
import { SqliteStore } from "../../src/store/sqlite/store";
import { outboxRows } from "../../src/webhooks/outbox";

export type HeldPolls = { close(): void };

/**
 * A job of `default` that stays Pending: queued straight into the store, as another process would, so nothing
 * wakes the server's scheduler to run it. Its polls are held until their wait is over.
 */
export async function parkJob(dataDir: string): Promise<number> {
  const store = SqliteStore.open(dataDir, { outbox: outboxRows });
  try {
    const environment = await store.access.findEnvironment("default");
    const body = new TextEncoder().encode(JSON.stringify([{ id: "parked", name: "Waits" }]));
    const [queued] = await store.queue.enqueue([{ environmentId: environment!.id, type: "SubArea", recordCount: 1, body }]);
    if (!queued || queued.conflict) throw new Error("the parked job was not queued");
    return queued.job.id;
  } finally {
    await store.close();
  }
}

/** `count` polls of the job with `Prefer: wait=60`, each on its own connection, sent and left waiting. */
export async function holdPolls(base: string, key: string, jobId: number, count: number): Promise<HeldPolls> {
  const url = new URL(`${base}/v2/status/${jobId}`);
  const request = `GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nApi-Key: ${key}\r\nPrefer: wait=60\r\n\r\n`;
  let answered = 0;
  const sockets: Array<{ end(): void }> = [];
  for (let i = 0; i < count; i++) {
    sockets.push(
      await Bun.connect({
        hostname: url.hostname,
        port: Number(url.port),
        socket: { open: (socket) => void socket.write(request), data: () => void answered++ },
      }),
    );
  }
  return {
    close() {
      if (answered > 0) throw new Error(`${answered} of the ${count} held polls were answered early`);
      for (const socket of sockets) socket.end();
    },
  };
}

/** Waits until the server says it holds `count` polls (its importd_held_polls gauge). */
export async function waitHeld(origin: string, count: number, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const text = await (await fetch(`${origin}/metrics`)).text();
    const held = Number(/^importd_held_polls (\d+)/m.exec(text)?.[1] ?? 0);
    if (held >= count) return;
    if (Date.now() > until) throw new Error(`only ${held} of ${count} polls held after ${timeoutMs} ms`);
    await Bun.sleep(100);
  }
}
