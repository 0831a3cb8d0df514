import { expect, test } from "bun:test";
import { IntakeService } from "../../src/worker/intake-service";
import type { IntakeResult } from "../../src/jobs/intake";
import { resourceByPath } from "../../src/resources/registry";
import type { Placement, WorkerPool } from "../../src/worker/pool";
import type { JobScheduler } from "../../src/worker/scheduler";

test("a small body's intake and its job's run are light (the pool's light lane); a body of 64 KB or more is not", async () => {
  const placements: Array<Placement | undefined> = [];
  const accepted: Array<{ jobId: number; slot: number | undefined; light: boolean | undefined }> = [];
  let nextId = 1;
  const pool = {
    run: async (_task: string, _input: unknown, _transfer: unknown, placement?: Placement) => {
      placements.push(placement);
      placement?.onSlot?.(0);
      return { ok: true, replayed: false, job: { id: nextId++, type: "Asset", recordCount: 1 } } as unknown as IntakeResult;
    },
  } as unknown as WorkerPool;
  const scheduler = { accepted: (jobId: number, _environmentId: number, slot?: number, light?: boolean) => void accepted.push({ jobId, slot, light }) } as unknown as JobScheduler;
  const intake = new IntakeService({ pool, scheduler, log: () => {} });
  const resource = resourceByPath("assets")!;
  for (const bytes of [2, 64 * 1024 - 1, 64 * 1024]) await intake.accept({ environmentId: 1, environment: "default", resource, body: new Uint8Array(bytes) });
  expect(placements.map((placement) => placement?.light)).toEqual([true, true, false]);
  expect(accepted).toEqual([
    { jobId: 1, slot: 0, light: true },
    { jobId: 2, slot: 0, light: true },
    { jobId: 3, slot: 0, light: false },
  ]);
});
