// Baseline for row 7 (issue 45): the least an HTTP job queue does for a one-record job.
// Usage: bun http-queue.ts <dir>   Prints its port, then serves until killed:
//   POST /v2/assets      parses and checks the one-record array, commits it as a Pending job in a transaction of its
//                        own (WAL, synchronous = FULL: durable before the answer), answers 202 with the job
//   GET /v2/status/:id   the job's status, under importd's field name, so that the bench polls both sides alike
// A loop in the same process and thread applies the jobs in id order, one between two turns of the event loop, each
// in its own transaction: the record's upsert and the job's status. No keys, log or idempotency: a floor, not a rival.
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { parseAndValidate } from "../lib/plain";

const db = new Database(join(process.argv[2]!, "queue.sqlite"), { create: true, strict: true });
db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL");
db.exec("CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, status TEXT NOT NULL, payload BLOB NOT NULL, created_at TEXT NOT NULL)");
// The loop finds the next job without walking the ones already done.
db.exec("CREATE INDEX pending_jobs ON jobs (id) WHERE status = 'Pending'");
db.exec("CREATE TABLE records (id TEXT PRIMARY KEY, record TEXT NOT NULL, job_id INTEGER NOT NULL, updated_at TEXT NOT NULL)");

const insertJob = db.prepare<{ id: number }, [Uint8Array, string]>("INSERT INTO jobs (status, payload, created_at) VALUES ('Pending', ?, ?) RETURNING id");
const nextJob = db.prepare<{ id: number; payload: Uint8Array }, []>("SELECT id, payload FROM jobs WHERE status = 'Pending' ORDER BY id LIMIT 1");
const upsert = db.prepare("INSERT INTO records (id, record, job_id, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET record = excluded.record, job_id = excluded.job_id, updated_at = excluded.updated_at");
const finish = db.prepare("UPDATE jobs SET status = 'Succeeded' WHERE id = ?");
const statusOf = db.prepare<{ status: string }, [number]>("SELECT status FROM jobs WHERE id = ?");

const decoder = new TextDecoder();
const accept = db.transaction((payload: Uint8Array) => insertJob.get(payload, new Date().toISOString())!.id);
const apply = db.transaction((job: { id: number; payload: Uint8Array }) => {
  const now = new Date().toISOString();
  for (const record of JSON.parse(decoder.decode(job.payload)) as Array<{ id: string }>) upsert.run(record.id, JSON.stringify(record), job.id, now);
  finish.run(job.id);
});

let applying = false;
async function applyAll(): Promise<void> {
  if (applying) return;
  applying = true;
  // Finding no job and clearing the flag happen in one turn, so a job accepted after it starts the loop again.
  for (let job = nextJob.get(); job; job = nextJob.get()) {
    apply(job);
    // One job a turn: the requests that came in meanwhile are answered between two.
    await new Promise((resolve) => setImmediate(resolve));
  }
  applying = false;
}

const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  routes: {
    "/v2/assets": {
      POST: async (request) => {
        const body = new Uint8Array(await request.arrayBuffer());
        try {
          if (parseAndValidate(body).length !== 1) throw new Error("not a one-record array");
        } catch (error) {
          return Response.json({ title: (error as Error).message }, { status: 400 });
        }
        const id = accept(body);
        void applyAll();
        return Response.json({ id, importJobStatus: "Pending" }, { status: 202 });
      },
    },
    "/v2/status/:id": (request) => {
      const id = Number(request.params.id);
      const job = statusOf.get(id);
      return job ? Response.json({ id, importJobStatus: job.status, output: null }) : Response.json({ title: "no such job" }, { status: 404 });
    },
  },
});
console.log(server.port);
