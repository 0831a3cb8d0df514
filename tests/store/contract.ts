// The store contract: what every backend's ports must do, written against the interfaces only. A backend's
// test file calls storeContract with a factory that gives a fresh, migrated, empty store each time.
import { afterEach, describe, expect, test } from "bun:test";
import { Access } from "../../src/access/access";
import { groupLimits, runNext } from "../../src/jobs/apply";
import { resourceByPath } from "../../src/resources/registry";
import { StaleClaim } from "../../src/store/errors";
import { openSnapshot } from "../../src/store/open";
import type { JobListOptions, RecordSnapshot, Store } from "../../src/store/ports";
import { copyFromRecords } from "../../src/store/postgres/records";
import { asset } from "../helpers/records";

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
const subAreas = (...names: string[]) => names.map((name) => ({ id: name.toLowerCase(), name }));

/** Records of ids that sort differently by bytes and by language, read back a page of 3 at a time: in byte order. */
export async function expectIdsPagedInByteOrder(store: Store) {
  const environmentId = (await new Access(store.access).createEnvironment("paged")).id;
  const ids = ["b", "B", "a-2", "a1", "A", "Z", "é", "e", "_x", "10", "9"];
  await store.queue.enqueue([{ environmentId, type: "SubArea", recordCount: ids.length, body: encode(ids.map((id) => ({ id, name: id }))) }]);
  await runNext(store.queue, environmentId, { token: crypto.randomUUID() });
  const paged: string[] = [];
  for (let after: string | undefined; ; after = paged.at(-1)) {
    const page = await store.records.page(resourceByPath("subareas")!, environmentId, 3, after);
    paged.push(...page.map((record) => record.id as string));
    if (page.length < 3) break;
  }
  // JavaScript's sort compares UTF-16 code units: for these, the order of their UTF-8 bytes.
  expect(paged).toEqual([...ids].sort());
}

export function storeContract(backend: string, freshStore: () => Promise<Store>) {
  describe(`the store contract (${backend})`, () => {
    let store: Store;
    afterEach(async () => {
      await store?.close();
    });

    /** A fresh store with environments `one` (id e1) and `two` (id e2). */
    async function setUp() {
      store = await freshStore();
      const access = new Access(store.access);
      const e1 = (await access.createEnvironment("one")).id;
      const e2 = (await access.createEnvironment("two")).id;
      return { queue: store.queue, e1, e2 };
    }
    const enqueue = (environmentId: number, records: unknown[], idempotency?: { key: string; requestHash: string }) => enqueueAs(environmentId, "SubArea", records, idempotency);
    const enqueueAs = async (environmentId: number, type: string, records: unknown[], idempotency?: { key: string; requestHash: string }) => {
      const [outcome] = await store.queue.enqueue([{ environmentId, type, recordCount: records.length, body: encode(records), idempotency }]);
      if (outcome!.conflict) throw new Error("conflict");
      return outcome!.job;
    };
    const token = () => crypto.randomUUID();

    test("enqueue answers Pending jobs in the order asked, numbered in that order, with their payloads", async () => {
      const { queue, e1 } = await setUp();
      const answers = await queue.enqueue([1, 2, 3].map((n) => ({ environmentId: e1, type: "SubArea", recordCount: n, body: encode(subAreas(`A${n}`)) })));
      const jobs = answers.map((answer) => (answer.conflict ? undefined : answer.job)!);
      expect(jobs.map((job) => [job.status, job.recordCount, job.attempts, job.output])).toEqual([1, 2, 3].map((n) => ["Pending", n, 0, null]));
      expect(jobs[1]!.id).toBeGreaterThan(jobs[0]!.id);
      expect(jobs[2]!.id).toBeGreaterThan(jobs[1]!.id);
      expect(new TextDecoder().decode(await queue.payload(jobs[0]!.id))).toBe(JSON.stringify(subAreas("A1")));
    });

    test("payloads come back byte for byte, small and large (on PostgreSQL they travel as base64)", async () => {
      const { queue, e1 } = await setUp();
      const bodies = [1, 64 * 1024 - 1, 64 * 1024, 3 * 1024 * 1024 + 7].map((size) => crypto.getRandomValues(new Uint8Array(size)));
      // In one intake, as a group commit stores them, between small ones.
      const answers = await queue.enqueue(bodies.map((body, n) => ({ environmentId: e1, type: "SubArea", recordCount: n + 1, body })));
      for (const [n, answer] of answers.entries()) {
        const stored = await queue.payload((answer.conflict ? undefined : answer.job)!.id);
        expect({ n, size: stored?.byteLength, equal: Buffer.from(stored!).equals(Buffer.from(bodies[n]!)) }).toEqual({ n, size: bodies[n]!.byteLength, equal: true });
      }
    });

    test("a claim takes the environment's oldest pending job first, with the small untried ones after it, and marks them Processing", async () => {
      const { queue, e1 } = await setUp();
      const jobs = [await enqueue(e1, subAreas("A")), await enqueue(e1, subAreas("B")), await enqueue(e1, subAreas("C"))];
      const run = (await queue.claimRun({ token: token(), environmentId: e1 }, groupLimits))!;
      expect(run.jobs.map((job) => [job.id, job.status, job.attempts])).toEqual(jobs.map((job) => [job.id, "Processing", 1]));
      expect((await store.jobs.find(e1, jobs[2]!.id, ""))!.status).toBe("Processing");
    });

    test("one run per environment at a time: while one is in progress, the environment has nothing to claim; other environments do", async () => {
      const { queue, e1, e2 } = await setUp();
      await enqueue(e1, subAreas("A"));
      const first = (await queue.claimRun({ token: token(), environmentId: e1, alone: true }, groupLimits))!;
      const later = await enqueue(e1, subAreas("B"));
      const other = await enqueue(e2, subAreas("C"));
      expect(await queue.claimRun({ token: token(), environmentId: e1 }, groupLimits)).toBeUndefined();
      // A hint: on a store shared by several processes, only a claim can tell that a run is in progress.
      const heads = (await queue.heads()).map((head) => head.jobId);
      expect(heads).toContain(other.id);
      expect(heads).not.toContain(later.id);
      expect((await queue.claimRun({ token: token(), environmentId: e2 }, groupLimits))!.jobs[0]!.id).toBe(other.id);
      await queue.completeRun(first, async () => [{ jobId: first.jobs[0]!.id, status: "Succeeded", output: { message: "ok", total: 1, applied: 1, rejected: 0, errors: [] }, rejected: [] }]);
      expect((await queue.claimRun({ token: token(), environmentId: e1 }, groupLimits))!.jobs[0]!.id).toBe(later.id);
    });

    test("completing a run stores each job's outcome and rejected records, drops the payloads, and applies the records", async () => {
      const { queue, e1 } = await setUp();
      const good = await enqueue(e1, subAreas("North"));
      const duplicate = await enqueue(e1, [{ id: "x", name: "X" }, { id: "x", name: "Y" }]);
      const results = await runNext(queue, e1, { token: token() });
      expect(results!.map((result) => [result.id, result.status])).toEqual([[good.id, "Succeeded"], [duplicate.id, "Failed"]]);
      expect(await store.records.get(resourceByPath("subareas")!, e1, "north")).toMatchObject({ name: "North", lastJobId: good.id });
      const failed = (await store.jobs.find(e1, duplicate.id, ""))!;
      expect(failed.output!.message).toContain("more than once");
      expect((await store.jobs.rejections(duplicate.id, 10)).map((row) => row.position)).toEqual([0, 1]);
      // A cursor past any index, beyond PostgreSQL's integer too (the API takes 15 digits): an empty page.
      expect(await store.jobs.rejections(duplicate.id, 10, 999_999_999_999_999)).toEqual([]);
      expect(await queue.payload(good.id)).toBeUndefined();
    });

    test("a run sees which of the ids asked exist in its environment, its own upserts and awkward ids included, another environment's not", async () => {
      const { queue, e1, e2 } = await setUp();
      const awkward = ["quote ' \" mark", "ünïcødé ✓", "[\"json\"]", "back\\slash", "with,comma"];
      const sub = resourceByPath("subareas")!;
      for (const [environmentId, names] of [[e1, ["North", ...awkward]], [e2, ["South"]]] as const) {
        await enqueue(environmentId, names.map((name) => ({ id: name === "North" ? "north" : name === "South" ? "south" : name, name })));
        await runNext(queue, environmentId, { token: token() });
      }
      await enqueue(e1, subAreas("East"));
      const run = (await queue.claimRun({ token: token(), environmentId: e1 }, groupLimits))!;
      const seen: Array<Set<string>> = [];
      await queue.completeRun(run, async (records) => {
        seen.push(await records.existing(sub, ["north", "south", "west", ...awkward]));
        seen.push(await records.existing(sub, []));
        await records.upsert(sub, run.jobs[0]!.id, subAreas("East"));
        seen.push(await records.existing(sub, ["east", "west"]));
        return [{ jobId: run.jobs[0]!.id, status: "Succeeded", output: { message: "ok", total: 1, applied: 1, rejected: 0, errors: [] }, rejected: [] }];
      });
      expect(seen.map((ids) => [...ids].sort())).toEqual([["north", ...awkward].sort(), [], ["east"]]);
    });

    test("in one run, a job's references are checked against the records as the jobs before it left them", async () => {
      const { queue, e1 } = await setUp();
      await enqueueAs(e1, "AssetType", [{ id: "pipe", name: "Pipe" }]);
      await enqueueAs(e1, "AssetCategory", [{ id: "water", name: "Water network" }]);
      await enqueueAs(e1, "SubArea", [{ id: "north", name: "North" }]);
      await runNext(queue, e1, { token: token() });
      const before = await enqueueAs(e1, "Asset", [asset(1, { subAreaId: "x" }), asset(2)]);
      const created = await enqueueAs(e1, "SubArea", [{ id: "x", name: "X" }]);
      const after = await enqueueAs(e1, "Asset", [asset(4, { subAreaId: "x" })]);
      const results = (await runNext(queue, e1, { token: token() }))!;
      expect(results.map((result) => [result.id, result.status, result.applied])).toEqual([
        [before.id, "PartiallySucceeded", 1],
        [created.id, "Succeeded", 1],
        [after.id, "Succeeded", 1],
      ]);
      expect((await store.jobs.rejections(before.id, 10)).map((row) => [row.position, row.field])).toEqual([[0, "subAreaId"]]);
    });

    test("a big job's records are stored field for field, awkward text and nulls included, and counted", async () => {
      const { queue, e1 } = await setUp();
      const awkward = ["tab\there", "new\nline", "back\\slash", "\\N", "carriage\rreturn", "ünïcødé ✓", "", "quote ' and \" marks", "💧 [1,2] {\"a\":null}", "\\u0041 not an escape"];
      const records = Array.from({ length: 6_000 }, (_, i) => ({ id: `s${i}`, name: awkward[i % awkward.length]! + i, ...(i % 3 === 0 ? { description: awkward[i % awkward.length] } : {}) }));
      const first = await enqueue(e1, records);
      await runNext(queue, e1, { token: token() });
      expect((await store.jobs.find(e1, first.id, ""))!.output).toMatchObject({ applied: 6_000, created: 6_000, updated: 0, unchanged: 0 });
      const subareas = resourceByPath("subareas")!;
      for (const i of [0, 1, 2, 3, 4, 5, 6, 7, 8, 5_999]) {
        const stored = (await store.records.get(subareas, e1, `s${i}`))!;
        expect({ id: stored.id, name: stored.name, description: stored.description }).toEqual({ id: `s${i}`, name: records[i]!.name, description: records[i]!.description });
      }
      // Again with 10 changed (one to an absent description) and 10 new: the rest unchanged, not written.
      const again = [...records.slice(0, 5_990), ...records.slice(5_990).map((record) => ({ id: record.id, name: `${record.name}!` })), ...Array.from({ length: 10 }, (_, i) => ({ id: `new${i}`, name: "New" }))];
      const second = await enqueue(e1, again);
      await runNext(queue, e1, { token: token() });
      expect((await store.jobs.find(e1, second.id, ""))!.output).toMatchObject({ applied: 6_010, created: 10, updated: 10, unchanged: 5_990 });
      expect(await store.records.get(subareas, e1, "s0")).toMatchObject({ lastJobId: first.id });
      expect(await store.records.get(subareas, e1, "s5999")).toMatchObject({ name: `${records[5_999]!.name}!`, lastJobId: second.id });
    });

    // On PostgreSQL a big batch's rows go by binary COPY in chunks of 256 kB, each text with its length in UTF-8 bytes:
    // texts of 1 to 4 bytes a character, at their longest, fill several chunks.
    test("a big job's texts at their longest, in characters of 1 to 4 bytes of UTF-8, are stored as sent", async () => {
      const { queue, e1 } = await setUp();
      const characters = ["a", "ü", "✓", "💧"];
      const records = Array.from({ length: copyFromRecords }, (_, i) => ({ id: `long${i}`, name: characters[i % 4]!.repeat(255 - (i % 7)) }));
      const job = await enqueue(e1, records);
      await runNext(queue, e1, { token: token() });
      expect((await store.jobs.find(e1, job.id, ""))!.output).toMatchObject({ applied: copyFromRecords, created: copyFromRecords });
      const stored = new Map<string, unknown>();
      for (let after: string | undefined, page; (page = await store.records.page(resourceByPath("subareas")!, e1, 1_000, after)).length > 0; after = page.at(-1)!.id as string) {
        for (const record of page) stored.set(record.id as string, record.name);
      }
      expect(records.every((record) => stored.get(record.id) === record.name)).toBe(true);
      expect(stored.size).toBe(copyFromRecords);
    });

    // A big batch goes another way on PostgreSQL (COPY into a temporary table, then one merge): both are checked.
    test.each([
      ["a small batch", 0],
      ["a big batch", copyFromRecords],
    ])("an asset's numbers come back as sent, extremes included, and a lone surrogate as U+FFFD (%s)", async (_, padding) => {
      const { queue, e1 } = await setUp();
      await enqueueAs(e1, "AssetType", [{ id: "pipe", name: "Pipe" }, { id: "valve", name: "Valve" }]);
      await enqueueAs(e1, "AssetCategory", [{ id: "water", name: "Water network" }]);
      await enqueueAs(e1, "SubArea", [{ id: "north", name: "North" }, { id: "south", name: "South" }]);
      const numbers = [0, 0.1 + 0.2, 1e308, 5e-324, 123456789.12345679, Number.MAX_SAFE_INTEGER + 2, 1e21];
      const sent = numbers.map((value, i) => asset(i, { startPoint: value, endPoint: value, description: i === 0 ? "lone \ud800 surrogate" : null, geolocation: { ...asset(i).geolocation, locationStart: value, locationEnd: value } }));
      const job = await enqueueAs(e1, "Asset", [...sent, ...Array.from({ length: padding }, (_, i) => asset(1_000 + i))]);
      await runNext(queue, e1, { token: token() });
      expect((await store.jobs.find(e1, job.id, ""))!.output).toMatchObject({ applied: numbers.length + padding, rejected: 0 });
      const assets = resourceByPath("assets")!;
      for (const [i, value] of numbers.entries()) {
        const stored = (await store.records.get(assets, e1, sent[i]!.id))!;
        expect([stored.startPoint, stored.endPoint, (stored.geolocation as { locationStart: number }).locationStart]).toEqual([value, value, value]);
      }
      // Below zero too, where a location may go.
      const below = asset(100, { geolocation: { ...asset(100).geolocation, locationStart: -123.456, locationEnd: -1e-300 } });
      await enqueueAs(e1, "Asset", [below]);
      await runNext(queue, e1, { token: token() });
      expect((await store.records.get(assets, e1, below.id))!.geolocation).toMatchObject({ locationStart: -123.456, locationEnd: -1e-300 });
      expect((await store.records.get(assets, e1, sent[0]!.id))!.description).toBe("lone \ufffd surrogate");
      expect((await store.records.get(assets, e1, sent[1]!.id))!.description ?? null).toBeNull();
    });

    test("big jobs one after another in one run, and a dry run: each counted as its own, the dry run's writes undone", async () => {
      const { queue, e1 } = await setUp();
      const size = copyFromRecords + 100;
      const batch = (from: number, name: string) => Array.from({ length: size }, (_, i) => ({ id: `b${from + i}`, name }));
      const first = await enqueue(e1, batch(0, "First"));
      const overlapping = await enqueue(e1, batch(size / 2, "Second"));
      const [dryRun] = await queue.enqueue([{ environmentId: e1, type: "SubArea", recordCount: size, body: encode(batch(0, "Dry")), dryRun: true }]);
      const again = await enqueue(e1, batch(size / 2, "Second"));
      const results = [...(await runNext(queue, e1, { token: token() }))!, ...(await runNext(queue, e1, { token: token() }))!, ...(await runNext(queue, e1, { token: token() }))!];
      expect(results.map((result) => result.id)).toEqual([first.id, overlapping.id, (dryRun as { job: { id: number } }).job.id, again.id]);
      const counts = async (id: number) => {
        const { created, updated, unchanged } = (await store.jobs.find(e1, id, ""))!.output!;
        return { created, updated, unchanged };
      };
      expect(await counts(first.id)).toEqual({ created: size, updated: 0, unchanged: 0 });
      expect(await counts(overlapping.id)).toEqual({ created: size / 2, updated: size / 2, unchanged: 0 });
      expect(await counts(results[2]!.id)).toEqual({ created: 0, updated: size, unchanged: 0 });
      expect(await counts(again.id)).toEqual({ created: 0, updated: 0, unchanged: size });
      const subareas = resourceByPath("subareas")!;
      expect(await store.records.get(subareas, e1, "b0")).toMatchObject({ name: "First", lastJobId: first.id });
      expect(await store.records.get(subareas, e1, `b${size}`)).toMatchObject({ name: "Second", lastJobId: overlapping.id });
    });

    test("ids that differ only in lone surrogates are one row once stored: the batch fails as holding an id twice", async () => {
      const { queue, e1 } = await setUp();
      const job = await enqueue(e1, [{ id: "area-\ud800", name: "One" }, { id: "area-\udc00", name: "Two" }, { id: "area-ok", name: "Ok" }]);
      const [result] = (await runNext(queue, e1, { token: token() }))!;
      expect(result).toMatchObject({ id: job.id, status: "Failed", applied: 0 });
      expect((await store.jobs.find(e1, job.id, ""))!.output!.message).toContain("more than once");
    });

    test("a reference sent with a lone surrogate finds the record stored with it", async () => {
      const { queue, e1 } = await setUp();
      await enqueueAs(e1, "AssetType", [{ id: "pipe", name: "Pipe" }, { id: "valve", name: "Valve" }]);
      await enqueueAs(e1, "AssetCategory", [{ id: "water", name: "Water network" }]);
      await enqueueAs(e1, "SubArea", [{ id: "north-\ud800", name: "North" }, { id: "south", name: "South" }]);
      await runNext(queue, e1, { token: token() });
      const later = await enqueueAs(e1, "Asset", [asset(0, { subAreaId: "north-\ud800" })]);
      const [result] = (await runNext(queue, e1, { token: token() }))!;
      expect(result).toMatchObject({ id: later.id, status: "Succeeded", applied: 1 });
      const stored = (await store.records.get(resourceByPath("assets")!, e1, asset(0).id))!;
      expect(stored.subAreaId).toBe("north-\ufffd");
    });

    test("a stale claim token cannot complete: the run taken over writes nothing", async () => {
      const { queue, e1 } = await setUp();
      const job = await enqueue(e1, subAreas("A"));
      const stale = (await queue.claimRun({ token: "stale", environmentId: e1 }, groupLimits))!;
      await queue.abandonRun(stale);
      const current = (await queue.claimRun({ token: "current", environmentId: e1, takeOver: { token: "stale", countsAsAttempt: true } }, groupLimits))!;
      expect(current.jobs[0]!.id).toBe(job.id);
      const outcome = { jobId: job.id, status: "Succeeded" as const, output: { message: "stale", total: 1, applied: 1, rejected: 0, errors: [] }, rejected: [] };
      await expect(queue.completeRun(stale, async () => [outcome])).rejects.toBeInstanceOf(StaleClaim);
      expect((await store.jobs.find(e1, job.id, ""))!.status).toBe("Processing");
      await queue.completeRun(current, async () => [{ ...outcome, output: { ...outcome.output, message: "current" } }]);
      expect((await store.jobs.find(e1, job.id, ""))!.output!.message).toBe("current");
    });

    test("attempts are counted at each claim and kept when a run is cut short; a taken-over run counts, unless it met a storage fault; a tried job runs alone", async () => {
      const { queue, e1 } = await setUp();
      const job = await enqueue(e1, subAreas("A"));
      await enqueue(e1, subAreas("B"));
      const first = (await queue.claimRun({ token: "1", environmentId: e1 }, groupLimits))!;
      expect(first.jobs.map((j) => j.attempts)).toEqual([1, 1]);
      await queue.abandonRun(first);
      expect((await store.jobs.find(e1, job.id, ""))!).toMatchObject({ status: "Processing", attempts: 1 });
      const second = (await queue.claimRun({ token: "2", environmentId: e1, takeOver: { token: "1", countsAsAttempt: true } }, groupLimits))!;
      expect(second.jobs.map((j) => [j.id, j.attempts])).toEqual([[job.id, 2]]);
      await queue.abandonRun(second);
      const third = (await queue.claimRun({ token: "3", environmentId: e1, takeOver: { token: "2", countsAsAttempt: true } }, groupLimits))!;
      expect(third.jobs[0]!.attempts).toBe(3);
      await queue.abandonRun(third);
      const notCounted = (await queue.claimRun({ token: "4", environmentId: e1, takeOver: { token: "3", countsAsAttempt: false } }, groupLimits))!;
      expect(notCounted.jobs[0]!.attempts).toBe(3);
    });

    test("a group cut short by a storage fault and tried again with its token is claimed again whole, its attempts not counted twice, and completes", async () => {
      const { queue, e1 } = await setUp();
      const jobs = [await enqueue(e1, subAreas("A")), await enqueue(e1, subAreas("B")), await enqueue(e1, subAreas("C"))];
      const cut = (await queue.claimRun({ token: "t", environmentId: e1 }, groupLimits))!;
      expect(cut.jobs.map((job) => job.id)).toEqual(jobs.map((job) => job.id));
      await queue.abandonRun(cut);
      const again = (await queue.claimRun({ token: "t", environmentId: e1, takeOver: { token: "t", countsAsAttempt: false } }, groupLimits))!;
      expect(again.jobs.map((job) => [job.id, job.attempts])).toEqual(jobs.map((job) => [job.id, 1]));
      const outcome = (jobId: number) => ({ jobId, status: "Succeeded" as const, output: { message: "done", total: 1, applied: 1, rejected: 0, errors: [] }, rejected: [] });
      await queue.completeRun(again, async () => jobs.map((job) => outcome(job.id)));
      for (const job of jobs) expect((await store.jobs.find(e1, job.id, ""))!.status).toBe("Succeeded");
    });

    test("a job claimed more than the allowed attempts is given up as Failed, with a message that says so", async () => {
      const { queue, e1 } = await setUp();
      const job = await enqueue(e1, subAreas("A"));
      for (let attempt = 1; attempt <= 3; attempt++) {
        const run = await queue.claimRun({ token: `t${attempt}`, environmentId: e1, takeOver: { token: `t${attempt - 1}`, countsAsAttempt: true } }, groupLimits);
        await queue.abandonRun(run!);
      }
      const results = await runNext(queue, e1, { token: token(), takeOver: { token: "t3", countsAsAttempt: true } });
      expect(results!.map((result) => [result.id, result.status])).toEqual([[job.id, "Failed"]]);
      expect((await store.jobs.find(e1, job.id, ""))!.output!.message).toContain("after 3 attempts");
    });

    test("an idempotency key replays its job for the same request, conflicts for another, and is per environment", async () => {
      const { queue, e1, e2 } = await setUp();
      const key = { key: "k", requestHash: "h1" };
      const first = await enqueue(e1, subAreas("A"), key);
      const [replay] = await queue.enqueue([{ environmentId: e1, type: "SubArea", recordCount: 1, body: encode(subAreas("A")), idempotency: key }]);
      expect(replay).toMatchObject({ replayed: true, job: { id: first.id } });
      const [conflict] = await queue.enqueue([{ environmentId: e1, type: "SubArea", recordCount: 1, body: encode(subAreas("B")), idempotency: { key: "k", requestHash: "h2" } }]);
      expect(conflict).toEqual({ conflict: true });
      const elsewhere = await enqueue(e2, subAreas("A"), key);
      expect(elsewhere.id).not.toBe(first.id);
    });

    test("purge deletes the job documents completed before the cut-off, their rejected records with them, and keeps the rest", async () => {
      const { queue, e1 } = await setUp();
      const done = await enqueue(e1, [{ id: "x", name: "X" }, { id: "x", name: "Y" }]);
      await runNext(queue, e1, { token: token() });
      const waiting = await enqueue(e1, subAreas("B"));
      expect(await queue.purge("2000-01-01T00:00:00.000Z")).toBe(0);
      expect(await queue.purge(new Date(Date.now() + 60_000).toISOString())).toBe(1);
      expect(await store.jobs.find(e1, done.id, "")).toBeUndefined();
      expect(await store.jobs.rejections(done.id, 10)).toEqual([]);
      expect((await store.jobs.find(e1, waiting.id, ""))!.status).toBe("Pending");
    });

    test("list answers newest first, narrowed by each filter given (status, type, dry run) and paged by id", async () => {
      const { queue, e1 } = await setUp();
      const subArea = await enqueue(e1, subAreas("North"));
      const assetType = await enqueueAs(e1, "AssetType", [{ id: "pipe", name: "Pipe" }]);
      await runNext(queue, e1, { token: token() });
      const [dry] = await queue.enqueue([{ environmentId: e1, type: "SubArea", recordCount: 1, body: encode(subAreas("South")), dryRun: true }]);
      const dryId = (dry as { job: { id: number } }).job.id;
      const pendingAsset = await enqueueAs(e1, "Asset", [asset(1)]);
      const ids = async (options: Partial<JobListOptions>) =>
        (await store.jobs.list(e1, { limit: 10, retainedSince: "", ...options })).map((job) => job.id);

      expect(await ids({})).toEqual([pendingAsset.id, dryId, assetType.id, subArea.id]);
      expect(await ids({ type: "SubArea" })).toEqual([dryId, subArea.id]);
      expect(await ids({ type: "Asset" })).toEqual([pendingAsset.id]);
      expect(await ids({ type: "AssetCategory" })).toEqual([]);
      expect(await ids({ type: "SubArea", dryRun: false })).toEqual([subArea.id]);
      expect(await ids({ type: "SubArea", status: "Pending" })).toEqual([dryId]);
      expect(await ids({ type: "AssetType", status: "Succeeded" })).toEqual([assetType.id]);
      expect(await ids({ type: "SubArea", limit: 1, after: dryId })).toEqual([subArea.id]);
    });

    test("records page in the byte order of their ids (as SQLite compares them, whatever PostgreSQL's locale)", async () => {
      store = await freshStore();
      await expectIdsPagedInByteOrder(store);
    });

    describe("snapshots, for exports (DECISIONS 14)", () => {
      const subareas = resourceByPath("subareas")!;
      /** Every record of the snapshot, a slice of `limit` at a time, each slice's size too. */
      const readAll = async (snapshot: RecordSnapshot, limit: number) => {
        const records: Array<Record<string, unknown>> = [];
        const slices: number[] = [];
        for (let slice = await snapshot.next(limit); slice !== undefined; slice = await snapshot.next(limit)) {
          records.push(...slice);
          slices.push(slice.length);
        }
        return { records, slices };
      };

      test("a snapshot reads the records as they were when it opened, in the byte order of their ids, a slice at a time", async () => {
        const { queue, e1, e2 } = await setUp();
        const ids = ["b", "B", "a-2", "a1", "A", "Z", "é", "e", "_x", "10", "9"];
        await enqueue(e1, ids.map((id) => ({ id, name: `${id} first` })));
        await enqueue(e2, subAreas("Elsewhere"));
        await runNext(queue, e1, { token: token() });
        await runNext(queue, e2, { token: token() });
        const snapshot = await openSnapshot(store.handleFor(0), subareas, e1);
        // Written after it opened: a change, a new record, a deletion.
        await enqueue(e1, [{ id: "b", name: "b changed" }, { id: "new", name: "New" }]);
        await runNext(queue, e1, { token: token() });
        await store.queue.enqueue([{ environmentId: e1, type: "SubArea", recordCount: 1, body: encode(["A"]), operation: "delete" }]);
        await runNext(queue, e1, { token: token() });
        const { records, slices } = await readAll(snapshot, 3);
        expect(records.map((record) => record.id)).toEqual([...ids].sort());
        expect(records.every((record) => String(record.name).endsWith(" first"))).toBe(true);
        expect(slices).toEqual([3, 3, 3, 2]);
        expect(await snapshot.next(3)).toBeUndefined();
        await snapshot.close();
        await snapshot.close();
        // A new one sees what was written since.
        const after = await openSnapshot(store.handleFor(0), subareas, e1);
        const now = (await readAll(after, 100)).records;
        await after.close();
        expect(now.map((record) => record.id)).toEqual([...ids.filter((id) => id !== "A"), "new"].sort());
        expect(now.find((record) => record.id === "b")).toMatchObject({ name: "b changed" });
      });

      test("each record as a read by id gives it; updatedSince leaves out those written before it, slices still bounded by ids", async () => {
        const { queue, e1 } = await setUp();
        await enqueue(e1, subAreas("North", "South", "West"));
        await runNext(queue, e1, { token: token() });
        const { updatedAt } = (await store.records.get(subareas, e1, "north"))! as { updatedAt: string };
        await Bun.sleep(5);
        const since = new Date().toISOString();
        await enqueue(e1, [{ id: "south", name: "South, changed" }]);
        await runNext(queue, e1, { token: token() });
        const all = await openSnapshot(store.handleFor(0), subareas, e1);
        const { records } = await readAll(all, 100);
        await all.close();
        for (const record of records) expect(record).toEqual((await store.records.get(subareas, e1, record.id as string))!);
        const changed = await openSnapshot(store.handleFor(0), subareas, e1, { updatedSince: since });
        // Slices of one id each: the first (north) and the last (west) hold nothing written since.
        expect(await readAll(changed, 1)).toEqual({ records: [(await store.records.get(subareas, e1, "south"))!], slices: [0, 1, 0] });
        await changed.close();
        const fromFirst = await openSnapshot(store.handleFor(0), subareas, e1, { updatedSince: updatedAt });
        expect((await readAll(fromFirst, 100)).records).toHaveLength(3);
        await fromFirst.close();
      });
    });

    test("environments are isolated: jobs, records and reads of one are invisible to the other", async () => {
      const { queue, e1, e2 } = await setUp();
      const job = await enqueue(e1, subAreas("North"));
      await runNext(queue, e1, { token: token() });
      expect(await store.jobs.find(e2, job.id, "")).toBeUndefined();
      expect(await store.jobs.list(e2, { limit: 10, retainedSince: "" })).toEqual([]);
      expect(await store.records.get(resourceByPath("subareas")!, e2, "north")).toBeUndefined();
      expect(await store.records.page(resourceByPath("subareas")!, e1, 10)).toHaveLength(1);
      expect(await runNext(queue, e2, { token: token() })).toBeUndefined();
    });

    describe("deletes (DECISIONS 13)", () => {
      const enqueueDelete = async (environmentId: number, type: string, ids: unknown[], dryRun = false) => {
        const [outcome] = await store.queue.enqueue([{ environmentId, type, recordCount: ids.length, body: encode(ids), operation: "delete", dryRun }]);
        if (outcome!.conflict) throw new Error("conflict");
        return outcome!.job;
      };
      const subareas = resourceByPath("subareas")!;
      const assetsResource = resourceByPath("assets")!;
      const seedReferences = async (environmentId: number) => {
        await enqueueAs(environmentId, "AssetType", [{ id: "pipe", name: "Pipe" }, { id: "valve", name: "Valve" }]);
        await enqueueAs(environmentId, "AssetCategory", [{ id: "water", name: "Water network" }]);
        await enqueueAs(environmentId, "SubArea", [{ id: "north", name: "North" }, { id: "south", name: "South" }]);
        await runNext(store.queue, environmentId, { token: token() });
      };

      test("a delete job is stored with its operation, and the list narrows to it; imports are upserts", async () => {
        const { queue, e1 } = await setUp();
        const upsert = await enqueue(e1, subAreas("North"));
        const deletion = await enqueueDelete(e1, "SubArea", ["north"]);
        expect([upsert.operation, deletion.operation]).toEqual(["upsert", "delete"]);
        expect((await store.jobs.find(e1, deletion.id, ""))!.operation).toBe("delete");
        const ids = async (options: Partial<JobListOptions>) => (await store.jobs.list(e1, { limit: 10, retainedSince: "", ...options })).map((job) => job.id);
        expect(await ids({ operation: "delete" })).toEqual([deletion.id]);
        expect(await ids({ operation: "upsert" })).toEqual([upsert.id]);
        // Claimed and run like any job, in the same run as the import before it.
        const results = (await runNext(queue, e1, { token: token() }))!;
        expect(results.map((result) => [result.id, result.status])).toEqual([[upsert.id, "Succeeded"], [deletion.id, "Succeeded"]]);
        expect((await store.jobs.find(e1, deletion.id, ""))!).toMatchObject({ operation: "delete", output: { deleted: 1, notFound: 0, applied: 1, total: 1 } });
      });

      test("deletes the records that exist, counts the others (and a repeated id) notFound, and leaves a tombstone for each deleted one; another environment's records stay", async () => {
        const { queue, e1, e2 } = await setUp();
        await enqueue(e1, subAreas("A", "B", "C"));
        await enqueue(e2, subAreas("A"));
        await runNext(queue, e1, { token: token() });
        await runNext(queue, e2, { token: token() });
        const job = await enqueueDelete(e1, "SubArea", ["a", "nope", "b", "a"]);
        const [result] = (await runNext(queue, e1, { token: token() }))!;
        expect(result).toMatchObject({ id: job.id, status: "Succeeded", total: 4, applied: 4, rejected: 0 });
        const output = (await store.jobs.find(e1, job.id, ""))!.output!;
        expect(output).toMatchObject({ deleted: 2, notFound: 2, errors: [] });
        expect(output.message).toBe("Deleted 2 of 4 sub area records; 2 were not found (never imported, or already deleted).");
        expect(await store.records.get(subareas, e1, "a")).toBeUndefined();
        expect(await store.records.get(subareas, e1, "c")).toMatchObject({ id: "c" });
        expect(await store.records.get(subareas, e2, "a")).toMatchObject({ id: "a" });
        const tombstone = (await store.records.tombstone(subareas, e1, "a"))!;
        expect(tombstone).toMatchObject({ id: "a", deletedByJobId: job.id });
        expect(Date.parse(tombstone.deletedAt)).toBeGreaterThan(0);
        expect(await store.records.tombstone(subareas, e1, "nope")).toBeUndefined();
        expect(await store.records.tombstone(subareas, e2, "a")).toBeUndefined();
        expect(await store.records.tombstones(subareas, e2, 10)).toEqual([]);
      });

      test("a record others refer to is rejected, naming how many and one of them; nothing cascades; a later job of the run finds a deleted record gone", async () => {
        const { queue, e1 } = await setUp();
        await seedReferences(e1);
        await enqueueAs(e1, "Asset", [asset(2, { subAreaId: "north" }), asset(4, { subAreaId: "north" }), asset(6, { subAreaId: "north" }), asset(1, { subAreaId: "south" })]);
        await runNext(queue, e1, { token: token() });
        // One run: the asset that pointed at south goes, then south, then an asset that points at south is unknown.
        const assetGone = await enqueueDelete(e1, "Asset", [asset(1).id]);
        const areas = await enqueueDelete(e1, "SubArea", ["north", "south", "west"]);
        const late = await enqueueAs(e1, "Asset", [asset(9, { subAreaId: "south" })]);
        const results = (await runNext(queue, e1, { token: token() }))!;
        expect(results.map((result) => [result.id, result.status])).toEqual([
          [assetGone.id, "Succeeded"],
          [areas.id, "PartiallySucceeded"],
          [late.id, "Failed"],
        ]);
        const output = (await store.jobs.find(e1, areas.id, ""))!.output!;
        expect(output).toMatchObject({ total: 3, deleted: 1, notFound: 1, rejected: 1, applied: 2 });
        const reason = `3 assets refer to sub area 'north' (for example '${asset(2).id}'): delete them or change their subAreaId first.`;
        expect(output.errors).toEqual([{ index: 0, id: "north", field: "id", message: reason }]);
        expect(output.message).toBe(`Deleted 1 of 3 sub area records; 1 was not found (never imported, or already deleted); 1 was rejected: [0] ${reason}`);
        expect(await store.jobs.rejections(areas.id, 10)).toEqual([{ position: 0, field: "id", message: reason, record: JSON.stringify({ id: "north" }) }]);
        expect(await store.records.get(subareas, e1, "north")).toMatchObject({ id: "north" });
        expect(await store.records.get(subareas, e1, "south")).toBeUndefined();
        expect(await store.records.get(assetsResource, e1, asset(2).id)).toMatchObject({ subAreaId: "north" });
        expect((await store.jobs.rejections(late.id, 10)).map((row) => row.field)).toEqual(["subAreaId"]);
        const one = await enqueueDelete(e1, "AssetType", ["valve"]);
        await runNext(queue, e1, { token: token() });
        expect((await store.jobs.find(e1, one.id, ""))!.output!.errors[0]!.message).toBe(`1 asset refers to asset type 'valve' ('${asset(6).id}'): delete it or change its assetTypeId first.`);
      });

      test("importing a deleted id again creates the record and ends its tombstone; the ids of other tombstones stay deleted", async () => {
        const { queue, e1 } = await setUp();
        await enqueue(e1, subAreas("A", "B"));
        await enqueueDelete(e1, "SubArea", ["a", "b"]);
        await runNext(queue, e1, { token: token() });
        expect((await store.records.tombstones(subareas, e1, 10)).map((tombstone) => tombstone.id)).toEqual(["a", "b"]);
        const again = await enqueue(e1, [{ id: "a", name: "A again" }]);
        await runNext(queue, e1, { token: token() });
        expect((await store.jobs.find(e1, again.id, ""))!.output).toMatchObject({ created: 1 });
        expect(await store.records.get(subareas, e1, "a")).toMatchObject({ name: "A again", lastJobId: again.id });
        expect(await store.records.tombstone(subareas, e1, "a")).toBeUndefined();
        expect((await store.records.tombstones(subareas, e1, 10)).map((tombstone) => tombstone.id)).toEqual(["b"]);
      });

      test("tombstones page in the order the deletions happened, not by id: a reader's cursor never misses a later deletion of a smaller id", async () => {
        const { queue, e1 } = await setUp();
        await enqueue(e1, subAreas("M", "Z", "B", "A"));
        await runNext(queue, e1, { token: token() });
        await enqueueDelete(e1, "SubArea", ["z", "m"]);
        await runNext(queue, e1, { token: token() });
        const first = await store.records.tombstones(subareas, e1, 2);
        expect(first.map((tombstone) => tombstone.id)).toEqual(["z", "m"]);
        expect(await store.records.tombstones(subareas, e1, 2, first.at(-1)!.position)).toEqual([]);
        await enqueueDelete(e1, "SubArea", ["b"]);
        await runNext(queue, e1, { token: token() });
        await enqueueDelete(e1, "SubArea", ["a"]);
        await runNext(queue, e1, { token: token() });
        const next = await store.records.tombstones(subareas, e1, 1, first.at(-1)!.position);
        expect(next.map((tombstone) => tombstone.id)).toEqual(["b"]);
        expect((await store.records.tombstones(subareas, e1, 10, next[0]!.position)).map((tombstone) => tombstone.id)).toEqual(["a"]);
        // A cursor past any position, beyond PostgreSQL's integer too: an empty page.
        expect(await store.records.tombstones(subareas, e1, 10, 999_999_999_999_999)).toEqual([]);
      });

      test("a dry-run delete deletes nothing and leaves no tombstone, and says what it would delete", async () => {
        const { queue, e1 } = await setUp();
        await enqueue(e1, subAreas("A"));
        await runNext(queue, e1, { token: token() });
        const dry = await enqueueDelete(e1, "SubArea", ["a", "x"], true);
        await runNext(queue, e1, { token: token() });
        expect((await store.jobs.find(e1, dry.id, ""))!.output).toMatchObject({
          deleted: 1,
          notFound: 1,
          message: "Dry run: nothing was applied. Would delete 1 of 2 sub area records; 1 was not found (never imported, or already deleted).",
        });
        expect(await store.records.get(subareas, e1, "a")).toMatchObject({ id: "a" });
        expect(await store.records.tombstones(subareas, e1, 10)).toEqual([]);
      });

      test("a delete job's end is told to webhooks like any job's, its body the job document with its operation and counts", async () => {
        const { queue, e1 } = await setUp();
        await enqueue(e1, subAreas("A"));
        await runNext(queue, e1, { token: token() });
        await store.webhooks.create(e1, { url: "https://all.example/", events: ["job.succeeded"], secret: "whsec_x" });
        const deletion = await enqueueDelete(e1, "SubArea", ["a"]);
        await runNext(queue, e1, { token: token() });
        const [claimed] = await store.webhooks.claimDue({ token: token(), limit: 10, perEnvironment: 10, leaseMs: 60_000, busy: [] });
        const body = JSON.parse(claimed!.body);
        expect(body).toMatchObject({ type: "job.succeeded", data: { id: deletion.id, operation: "delete", importJobType: "SubArea", output: { deleted: 1, notFound: 0 } } });
      });

      test("purge deletes the tombstones of deletions before the cut-off, with their jobs", async () => {
        const { queue, e1 } = await setUp();
        await enqueue(e1, subAreas("A"));
        await enqueueDelete(e1, "SubArea", ["a"]);
        await runNext(queue, e1, { token: token() });
        await queue.purge("2000-01-01T00:00:00.000Z");
        expect(await store.records.tombstone(subareas, e1, "a")).toBeDefined();
        await queue.purge(new Date(Date.now() + 60_000).toISOString());
        expect(await store.records.tombstone(subareas, e1, "a")).toBeUndefined();
        expect(await store.records.tombstones(subareas, e1, 10)).toEqual([]);
      });

      test("purge keeps the tombstones of deletions since the cut-off, and of a resource deleted from again before it", async () => {
        const { queue, e1 } = await setUp();
        await enqueue(e1, subAreas("A", "B", "C"));
        await runNext(queue, e1, { token: token() });
        await enqueueDelete(e1, "SubArea", ["a"]);
        await runNext(queue, e1, { token: token() });
        await Bun.sleep(5);
        const cutOff = new Date().toISOString();
        await Bun.sleep(5);
        await enqueueDelete(e1, "SubArea", ["b", "c"]);
        await runNext(queue, e1, { token: token() });
        await queue.purge(cutOff);
        expect(await store.records.tombstone(subareas, e1, "a")).toBeUndefined();
        expect((await store.records.tombstones(subareas, e1, 10)).map((tombstone) => tombstone.id)).toEqual(["b", "c"]);
      });
    });

    describe("syncs (DECISIONS 13's mirror)", () => {
      const subareas = resourceByPath("subareas")!;
      const anHour = 3_600_000;
      const join = async (environmentId: number, syncId: number, records: unknown[], dryRun = false) => {
        const [outcome] = await store.queue.enqueue([{ environmentId, type: "SubArea", recordCount: records.length, body: encode(records), syncId, dryRun }]);
        if (outcome!.conflict) throw new Error("conflict");
        return outcome!.job;
      };
      const complete = async (environmentId: number, syncId: number, limits: Record<string, number> = { maxDeletePercent: 10 }, dryRun = false) => {
        const [outcome] = await store.queue.enqueue([{ environmentId, type: "SubArea", recordCount: 0, body: encode(limits), operation: "syncCompletion", syncId, dryRun }]);
        if (outcome!.conflict) throw new Error("conflict");
        return outcome!.job;
      };
      const runAll = async (environmentId: number) => {
        while (await runNext(store.queue, environmentId, { token: token() }));
      };
      const ids = async (environmentId: number) => (await store.records.page(subareas, environmentId, 1000)).map((record) => record.id as string);
      const named = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => ({ id: `s${String(from + i).padStart(3, "0")}`, name: `Area ${from + i}` }));
      const job = async (environmentId: number, id: number) => (await store.jobs.find(environmentId, id, ""))!;

      test("a sync opens after the environment's jobs so far; its jobs mark every id they sent, rejected ones too, and a job without a sync marks nothing", async () => {
        const { e1, e2 } = await setUp();
        await enqueue(e1, named(1, 3));
        const sync = await store.syncs.open(e1, "subareas", anHour);
        expect(sync).toMatchObject({ environmentId: e1, resource: "subareas", openedAfterSequence: 1, completedAt: null, completedByJobId: null, recordsSent: null });
        expect(await store.syncs.find(e2, sync.id)).toBeUndefined();
        // A repeated id fails the batch as a whole, but its ids were read: they count as sent.
        const repeated = await join(e1, sync.id, [...named(4, 5), named(4, 4)[0]]);
        const plain = await enqueue(e1, named(6, 7));
        const joined = await join(e1, sync.id, named(1, 2));
        await runAll(e1);
        const view = (await store.syncs.view(e1, sync.id))!;
        expect(view.recordsMarked).toBe(4);
        expect(view.jobs.map((one) => one.id)).toEqual([repeated.id, joined.id]);
        expect((await job(e1, plain.id)).syncId).toBeNull();
        expect((await job(e1, joined.id)).syncId).toBe(sync.id);
        expect((await job(e1, repeated.id)).status).toBe("Failed");
      });

      test("the completion deletes exactly the records no job of the sync sent, and keeps those another job wrote after the opening; a dry run deletes nothing", async () => {
        const { e1, e2 } = await setUp();
        await enqueue(e1, named(1, 20));
        await enqueue(e2, named(1, 20));
        await runAll(e1);
        await runAll(e2);
        const sync = await store.syncs.open(e1, "subareas", anHour);
        // After the opening, outside the sync: a new record and a changed one.
        await enqueue(e1, [{ id: "new", name: "New" }, { id: "s020", name: "Changed" }]);
        await join(e1, sync.id, named(1, 17));
        const dryRun = await complete(e1, sync.id, { maxDeletePercent: 10 }, true);
        await runAll(e1);
        expect((await job(e1, dryRun.id)).output).toMatchObject({ total: 2, deleted: 2, rejected: 0 });
        expect(await ids(e1)).toHaveLength(21);
        const completion = await complete(e1, sync.id);
        await runAll(e1);
        const done = await job(e1, completion.id);
        expect(done).toMatchObject({ status: "Succeeded", operation: "syncCompletion", syncId: sync.id, output: { total: 2, deleted: 2, rejected: 0 } });
        expect(await ids(e1)).toEqual([...named(1, 17).map((record) => record.id), "new", "s020"].sort());
        expect((await store.records.tombstone(subareas, e1, "s018"))!.deletedByJobId).toBe(completion.id);
        expect(await ids(e2)).toHaveLength(20);
        const ended = (await store.syncs.view(e1, sync.id))!;
        expect(ended).toMatchObject({ completedByJobId: completion.id, recordsSent: 17 });
        expect(ended.completedAt).not.toBeNull();
        // A later import that joined before the completion ran marks nothing in the ended sync.
        await join(e1, sync.id, [{ id: "late", name: "late" }]);
        await runAll(e1);
        expect((await store.syncs.view(e1, sync.id))!.recordsMarked).toBe(ended.recordsMarked);
      });

      test("guards: too many to delete, a job of the sync failed as a whole, an ended or expired sync; each fails the completion with nothing deleted", async () => {
        const { e1 } = await setUp();
        await enqueue(e1, named(1, 10));
        await runAll(e1);
        const sync = await store.syncs.open(e1, "subareas", anHour);
        await join(e1, sync.id, named(1, 8));
        const tooMany = await complete(e1, sync.id);
        const byCount = await complete(e1, sync.id, { maxDelete: 1 });
        await runAll(e1);
        expect(await job(e1, tooMany.id)).toMatchObject({ status: "Failed", output: { total: 2, deleted: 0 } });
        expect((await job(e1, tooMany.id)).output!.message).toBe(
          "Nothing was deleted: the mirror would delete 2 of 10 sub area records (20%), more than the 10% allowed. If that is right, complete the sync again with ?maxDeletePercent=20 (or ?maxDelete=2).",
        );
        expect((await job(e1, byCount.id)).status).toBe("Failed");
        expect(await ids(e1)).toHaveLength(10);

        // A joined job canceled while Pending: which ids it sent is unknown.
        const canceled = await join(e1, sync.id, named(9, 10));
        await store.queue.cancel(e1, canceled.id, { message: "Canceled on request before it started.", total: 2, applied: 0, rejected: 0, errors: [], canceled: true });
        // A dry run tells of it too, but does not answer for it: the real completion after it is stopped as well.
        const tried = await complete(e1, sync.id, { maxDeletePercent: 100 }, true);
        const blocked = await complete(e1, sync.id, { maxDeletePercent: 100 });
        await runAll(e1);
        expect((await job(e1, tried.id)).output!.message).toStartWith(`Dry run: nothing was applied. Applying it would fail: a job of sync ${sync.id} failed as a whole`);
        expect((await job(e1, blocked.id)).output!.message).toStartWith(`Nothing was deleted: a job of sync ${sync.id} failed as a whole, so which records it sent is unknown: job ${canceled.id} (2 records`);
        expect(await ids(e1)).toHaveLength(10);
        // The completion that reported it answered for it: the next one goes on.
        const allowed = await complete(e1, sync.id, { maxDeletePercent: 20 });
        await runAll(e1);
        expect(await job(e1, allowed.id)).toMatchObject({ status: "Succeeded", output: { deleted: 2 } });
        const again = await complete(e1, sync.id);
        await runAll(e1);
        expect((await job(e1, again.id)).output!.message).toStartWith(`Nothing was deleted: sync ${sync.id} was already completed by job ${allowed.id}`);

        const expired = await store.syncs.open(e1, "subareas", -1);
        const late = await complete(e1, expired.id, { maxDeletePercent: 100 });
        await runAll(e1);
        expect((await job(e1, late.id)).output!.message).toStartWith(`Nothing was deleted: sync ${expired.id} expired at ${expired.expiresAt}`);
        expect(await ids(e1)).toHaveLength(8);
      });

      test("purge drops the marks of expired and completed syncs, and the syncs that ended before the cut-off", async () => {
        const { e1 } = await setUp();
        const expiring = await store.syncs.open(e1, "subareas", 300);
        const open = await store.syncs.open(e1, "subareas", anHour);
        const completed = await store.syncs.open(e1, "subareas", anHour);
        await join(e1, expiring.id, named(1, 2));
        await join(e1, open.id, named(1, 3));
        await join(e1, completed.id, named(1, 3));
        await complete(e1, completed.id, { maxDeletePercent: 100 });
        await runAll(e1);
        await Bun.sleep(Math.max(0, Date.parse(expiring.expiresAt) - Date.now()) + 20);
        await store.queue.purge("2000-01-01T00:00:00.000Z");
        expect((await store.syncs.view(e1, expiring.id))!.recordsMarked).toBe(0);
        expect((await store.syncs.view(e1, completed.id))!).toMatchObject({ recordsMarked: 0, recordsSent: 3 });
        expect((await store.syncs.view(e1, open.id))!.recordsMarked).toBe(3);
        await store.queue.purge(new Date(Date.now() + 60_000).toISOString());
        expect(await store.syncs.find(e1, expiring.id)).toBeUndefined();
        expect((await store.syncs.view(e1, open.id))!.recordsMarked).toBe(3);
      });

      test("a completion's end is told to webhooks like any job's, its body the job document with operation syncCompletion", async () => {
        const { e1 } = await setUp();
        await store.webhooks.create(e1, { url: "https://all.example/", events: ["job.succeeded"], secret: "whsec_x" });
        const sync = await store.syncs.open(e1, "subareas", anHour);
        const completion = await complete(e1, sync.id);
        await runAll(e1);
        const [claimed] = await store.webhooks.claimDue({ token: token(), limit: 10, perEnvironment: 10, leaseMs: 60_000, busy: [] });
        expect(JSON.parse(claimed!.body)).toMatchObject({ type: "job.succeeded", data: { id: completion.id, operation: "syncCompletion", importJobType: "SubArea", output: { total: 0, deleted: 0 } } });
      });
    });

    describe("webhooks", () => {
      const all = ["job.succeeded", "job.partially_succeeded", "job.failed", "job.canceled"];
      const subscribe = (environmentId: number, url: string, events = all) => store.webhooks.create(environmentId, { url, events, secret: `whsec_${url}` });
      const claim = (options: Partial<{ limit: number; perEnvironment: number; leaseMs: number; busy: number[] }> = {}) =>
        store.webhooks.claimDue({ token: token(), limit: 10, perEnvironment: 10, leaseMs: 60_000, busy: [], ...options });
      const attempt = (n: number, status: number | null) => ({ attempt: n, at: new Date().toISOString(), status, error: status === null ? "connection refused" : null, durationMs: 3 });

      test("subscriptions are an environment's own: created, listed without their secret, found with it, removed", async () => {
        const { e1, e2 } = await setUp();
        const first = await subscribe(e1, "https://a.example/hook", ["job.failed"]);
        expect(first).toMatchObject({ environmentId: e1, url: "https://a.example/hook", events: ["job.failed"], disabledAt: null });
        expect(first).not.toHaveProperty("secret");
        expect(await store.webhooks.list(e1)).toEqual([first]);
        expect(await store.webhooks.list(e2)).toEqual([]);
        expect(await store.webhooks.find(e1, first.id)).toMatchObject({ id: first.id, secret: "whsec_https://a.example/hook" });
        expect(await store.webhooks.find(e2, first.id)).toBeUndefined();
        expect(await store.webhooks.remove(e2, first.id)).toBe(false);
        expect(await store.webhooks.remove(e1, first.id)).toBe(true);
        expect(await store.webhooks.list(e1)).toEqual([]);
      });

      test("the run that ends a job writes its event for each subscription that wants it, in the same commit, the job document as its body", async () => {
        const { queue, e1, e2 } = await setUp();
        const everything = await subscribe(e1, "https://all.example/");
        await subscribe(e1, "https://failures.example/", ["job.failed"]);
        await subscribe(e2, "https://other.example/");
        const good = await enqueue(e1, subAreas("North"));
        await runNext(queue, e1, { token: token() });
        const deliveries = await store.webhooks.deliveriesOf(good.id);
        expect(deliveries).toEqual([
          expect.objectContaining({ webhookId: everything.id, environmentId: e1, jobId: good.id, event: "job.succeeded", url: "https://all.example/", status: "pending", attempts: 0, history: [] }),
        ]);
        expect(deliveries[0]!.messageId).toMatch(/^msg_[0-9a-f]{32}$/);
        const [claimed] = await claim();
        expect(claimed).toMatchObject({ id: deliveries[0]!.id, secret: "whsec_https://all.example/", messageId: deliveries[0]!.messageId });
        const body = JSON.parse(claimed!.body);
        expect(body).toMatchObject({ type: "job.succeeded", data: { id: good.id, importJobStatus: "Succeeded", statusUrl: `/v2/status/${good.id}`, dryRun: false, operation: "upsert", output: { applied: 1 } } });
        expect(body.timestamp).toBe(body.data.completedAt);
      });

      test("a cancel writes job.canceled; a run that cannot complete writes nothing; a job without a subscription has no deliveries", async () => {
        const { queue, e1 } = await setUp();
        const quiet = await enqueue(e1, subAreas("Quiet"));
        await runNext(queue, e1, { token: token() });
        expect(await store.webhooks.deliveriesOf(quiet.id)).toEqual([]);
        await subscribe(e1, "https://all.example/");
        const canceled = await enqueue(e1, subAreas("Gone"));
        await queue.cancel(e1, canceled.id, { message: "canceled", total: 1, applied: 0, rejected: 0, errors: [], canceled: true });
        expect((await store.webhooks.deliveriesOf(canceled.id)).map((delivery) => delivery.event)).toEqual(["job.canceled"]);
        // A stale run rolls back: no event for a job it did not end.
        const stale = await enqueue(e1, subAreas("Stale"));
        const run = (await queue.claimRun({ token: token(), environmentId: e1 }, groupLimits))!;
        await queue.abandonRun(run);
        await queue.claimRun({ token: token(), environmentId: e1, takeOver: { token: run.token, countsAsAttempt: true } }, groupLimits);
        await expect(queue.completeRun(run, async () => [{ jobId: stale.id, status: "Succeeded", output: { message: "ok", total: 1, applied: 1, rejected: 0, errors: [] }, rejected: [] }])).rejects.toBeInstanceOf(StaleClaim);
        expect(await store.webhooks.deliveriesOf(stale.id)).toEqual([]);
      });

      test("a claim holds a delivery for its lease, one per subscription; an attempt to retry waits for its time; delivered is done", async () => {
        const { queue, e1 } = await setUp();
        const hook = await subscribe(e1, "https://all.example/");
        const other = await subscribe(e1, "https://other.example/");
        const jobs = [await enqueue(e1, subAreas("A")), await enqueue(e1, subAreas("B"))];
        await runNext(queue, e1, { token: token() });
        const first = await claim();
        // The oldest of each subscription; the second job's wait behind them.
        expect(first.map((delivery) => [delivery.webhookId, delivery.jobId])).toEqual([[hook.id, jobs[0]!.id], [other.id, jobs[0]!.id]]);
        expect(await claim()).toEqual([]);
        expect(await store.webhooks.nextDueAt()).toBeString();
        // Failed: back to pending, due later; the subscription's next delivery may go meanwhile.
        const later = new Date(Date.now() + 3_600_000).toISOString();
        expect(await store.webhooks.recordAttempt(first[0]!, attempt(1, 500), { status: "pending", retryAt: later })).toBe(true);
        expect(await store.webhooks.recordAttempt(first[0]!, attempt(1, 500), { status: "pending", retryAt: later })).toBe(false);
        const second = await claim({ busy: [other.id] });
        expect(second.map((delivery) => [delivery.webhookId, delivery.jobId])).toEqual([[hook.id, jobs[1]!.id]]);
        expect(await store.webhooks.recordAttempt(second[0]!, attempt(1, 204), { status: "delivered" })).toBe(true);
        expect(await store.webhooks.recordAttempt(first[1]!, attempt(1, 200), { status: "delivered" })).toBe(true);
        const [retried] = await store.webhooks.deliveriesOf(jobs[0]!.id);
        expect(retried).toMatchObject({ status: "pending", attempts: 1, nextAttemptAt: later, history: [expect.objectContaining({ attempt: 1, status: 500, durationMs: 3 })] });
        expect((await store.webhooks.deliveriesOf(jobs[1]!.id)).find((delivery) => delivery.webhookId === hook.id)).toMatchObject({ status: "delivered", attempts: 1 });
        expect(await claim({ busy: [other.id] })).toEqual([]);
      });

      test("claims go round the environments: at most perEnvironment in flight each (held claims and busy ones count), earliest due first within and across them", async () => {
        const { queue, e1, e2 } = await setUp();
        const many = [await subscribe(e1, "https://a.example/1"), await subscribe(e1, "https://a.example/2"), await subscribe(e1, "https://a.example/3")];
        const one = await subscribe(e2, "https://b.example/");
        // e1's job ends first: its three deliveries are due before e2's one.
        const first = await enqueue(e1, subAreas("A"));
        await runNext(queue, e1, { token: token() });
        await Bun.sleep(2);
        const second = await enqueue(e2, subAreas("B"));
        await runNext(queue, e2, { token: token() });
        const claimed = await claim({ perEnvironment: 2 });
        // Turn one: e1's earliest, then e2's; turn two: e1's next. e1's third waits for one of its two to end.
        expect(claimed.map((delivery) => [delivery.environmentId, delivery.webhookId, delivery.jobId])).toEqual([
          [e1, many[0]!.id, first.id],
          [e2, one.id, second.id],
          [e1, many[1]!.id, first.id],
        ]);
        expect(await claim({ perEnvironment: 2 })).toEqual([]);
        expect(await store.webhooks.recordAttempt(claimed[0]!, attempt(1, 200), { status: "delivered" })).toBe(true);
        // A subscription this process still sends to (its claim's lease past, say) counts as in flight.
        expect(await claim({ perEnvironment: 2, busy: [many[0]!.id] })).toEqual([]);
        expect((await claim({ perEnvironment: 2 })).map((delivery) => delivery.webhookId)).toEqual([many[2]!.id]);
      });

      test("with one slot left, the environment with nothing in flight gets it, though another's delivery is due earlier", async () => {
        const { queue, e1, e2 } = await setUp();
        await subscribe(e1, "https://a.example/1");
        await subscribe(e1, "https://a.example/2");
        const other = await subscribe(e2, "https://b.example/");
        await enqueue(e1, subAreas("A"));
        await runNext(queue, e1, { token: token() });
        await Bun.sleep(2);
        await enqueue(e2, subAreas("B"));
        await runNext(queue, e2, { token: token() });
        const [held] = await claim({ limit: 1 });
        expect(held!.environmentId).toBe(e1);
        expect((await claim({ limit: 1 })).map((delivery) => delivery.webhookId)).toEqual([other.id]);
      });

      test("a lease that runs out lets another claim take the delivery over; the first claim can then record nothing", async () => {
        const { queue, e1 } = await setUp();
        await subscribe(e1, "https://all.example/");
        const job = await enqueue(e1, subAreas("A"));
        await runNext(queue, e1, { token: token() });
        const [first] = await claim({ leaseMs: 1 });
        await Bun.sleep(5);
        const [again] = await claim();
        expect(again!.messageId).toBe(first!.messageId);
        expect(await store.webhooks.recordAttempt(first!, attempt(1, 200), { status: "delivered" })).toBe(false);
        expect(await store.webhooks.recordAttempt(again!, attempt(1, 200), { status: "delivered" })).toBe(true);
        expect((await store.webhooks.deliveriesOf(job.id))[0]).toMatchObject({ status: "delivered", attempts: 1 });
      });

      test("410 Gone disables the subscription: its pending deliveries fail, and later jobs write none for it", async () => {
        const { queue, e1 } = await setUp();
        const hook = await subscribe(e1, "https://gone.example/");
        const jobs = [await enqueue(e1, subAreas("A")), await enqueue(e1, subAreas("B"))];
        await runNext(queue, e1, { token: token() });
        const [first] = await claim();
        expect(await store.webhooks.recordAttempt(first!, attempt(1, 410), { status: "failed", disable: "the receiver answered 410 Gone" })).toBe(true);
        expect(await store.webhooks.find(e1, hook.id)).toMatchObject({ disabledReason: "the receiver answered 410 Gone", disabledAt: expect.any(String) });
        expect((await store.webhooks.deliveriesOf(jobs[1]!.id))[0]).toMatchObject({ status: "failed", attempts: 0 });
        const later = await enqueue(e1, subAreas("C"));
        await runNext(queue, e1, { token: token() });
        expect(await store.webhooks.deliveriesOf(later.id)).toEqual([]);
        expect(await claim()).toEqual([]);
        expect(await store.webhooks.nextDueAt()).toBeUndefined();
      });

      test("removing a subscription cancels its pending deliveries and keeps their history; purging a job deletes its deliveries", async () => {
        const { queue, e1 } = await setUp();
        const hook = await subscribe(e1, "https://all.example/");
        const job = await enqueue(e1, subAreas("A"));
        await runNext(queue, e1, { token: token() });
        expect(await store.webhooks.remove(e1, hook.id)).toBe(true);
        expect((await store.webhooks.deliveriesOf(job.id))[0]).toMatchObject({ status: "canceled", webhookId: null, url: "https://all.example/" });
        expect(await claim()).toEqual([]);
        expect(await queue.purge(new Date(Date.now() + 1000).toISOString())).toBe(1);
        expect(await store.webhooks.deliveriesOf(job.id)).toEqual([]);
      });
    });
  });
}
