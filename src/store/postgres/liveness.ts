import type { StalledInstance, StoreEvents } from "../ports";
import { instanceNamePrefix, statement, type Queryable } from "./connection";

/** How often a serving instance writes its heartbeat and looks for stalled instances. */
export const heartbeatEveryMs = 2_000;

// An instance is stalled once silent for idle_in_transaction_session_timeout, the operator's word on how long a
// run may wait on its instance; but never before 10 s (five heartbeats missed, not one late), and after 60 s
// where the timeout is not set.
const minStalledMs = 10_000;
const unsetStalledMs = 60_000;
// The row of an instance silent this long, with no connection left, is deleted.
const forgetAfterMs = 60 * 60_000;

const writeHeartbeat = statement(`INSERT INTO instances (id, heartbeat_at) VALUES ($1, now()) ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()`);
// Ends every connection of the instances whose heartbeat is older than the limit (those of a role this one may not
// signal are left alone). $1: this instance; $2: the least limit; $3: the limit where the timeout is not set.
const endStalled = statement(`
  WITH limits AS (
    SELECT CASE WHEN setting::bigint > 0 THEN greatest(setting::bigint, $2::bigint) ELSE $3::bigint END AS ms
    FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'
  ), stalled AS (
    SELECT id, (extract(epoch FROM now() - heartbeat_at) * 1000)::bigint AS silent_ms
    FROM instances, limits WHERE heartbeat_at < now() - limits.ms * interval '1 millisecond' AND id <> $1
  )
  SELECT stalled.id AS instance, stalled.silent_ms AS "silentMs", min(host(activity.client_addr)) AS address,
    count(*) FILTER (WHERE pg_terminate_backend(activity.pid))::int AS connections
  FROM stalled JOIN pg_stat_activity activity ON activity.application_name = '${instanceNamePrefix}' || stalled.id
  WHERE activity.datname = current_database() AND pg_has_role(activity.usesysid, 'MEMBER')
  GROUP BY stalled.id, stalled.silent_ms`);
const forgetGone = statement(`
  DELETE FROM instances WHERE heartbeat_at < now() - $1::float8 * interval '1 millisecond'
    AND NOT EXISTS (SELECT 1 FROM pg_stat_activity activity WHERE activity.application_name = '${instanceNamePrefix}' || instances.id)`);
const deleteInstance = statement(`DELETE FROM instances WHERE id = $1`);

/**
 * How long this instance has written its heartbeat without a gap (by this process's monotonic clock): it judges others
 * only after minStalledMs of it, so that after an outage of the database or a pause of its own, the live instances
 * have written theirs again before anyone is judged.
 */
export class BeatContinuity {
  private since?: number;
  private last?: number;

  /** A heartbeat was written at `nowMs`: a gap of over two periods since the last (a pause) starts afresh. */
  beat(nowMs: number): void {
    if (this.last === undefined || nowMs - this.last > 2 * heartbeatEveryMs + 1_000) this.since = nowMs;
    this.last = nowMs;
  }

  /** A heartbeat could not be written. */
  failed(): void {
    this.since = this.last = undefined;
  }

  /** Whether this instance has beaten long enough, without a gap, to judge others at `nowMs`. */
  mayJudge(nowMs: number): boolean {
    return this.since !== undefined && nowMs - this.since >= minStalledMs;
  }
}

/**
 * Tells stalled instances from live ones, and ends the connections of the stalled, so that their environments' locks
 * are freed and their runs taken over. PostgreSQL's idle_in_transaction_session_timeout ends a paused instance's
 * transaction only while it is idle; paused in the middle of a statement, its backend is `active`, and nothing of
 * PostgreSQL's ends it (docs/reliability.md, section 8). Fencing is unchanged: a run whose connection is ended commits
 * nothing. The heartbeat goes through the server thread's pool, whose statements are short: an instance that cannot
 * write it for seconds cannot reach the database for its runs either.
 */
export class InstanceLiveness {
  private timer?: ReturnType<typeof setInterval>;
  private tick?: Promise<void>;
  private events?: Pick<StoreEvents, "stalled" | "problem">;
  private readonly continuity = new BeatContinuity();

  constructor(
    private readonly database: Queryable,
    private readonly instance: string,
  ) {}

  /** Writes this instance's heartbeat: first at start-up, before any of its runs can take a lock. */
  async beat(): Promise<void> {
    try {
      await this.database.query(writeHeartbeat(this.instance));
      this.continuity.beat(performance.now());
    } catch (error) {
      this.continuity.failed();
      throw error;
    }
  }

  /** Beats every heartbeatEveryMs from now on (from start-up, so that a slow start is not taken for a stall). */
  start(): void {
    this.timer ??= setInterval(() => {
      this.tick ??= this.beatAndJudge().finally(() => (this.tick = undefined));
    }, heartbeatEveryMs);
  }

  /** From now on, also ends the connections of the instances found stalled, telling `events`. */
  judge(events: Pick<StoreEvents, "stalled" | "problem">): void {
    this.events = events;
  }

  private async beatAndJudge(): Promise<void> {
    try {
      await this.beat();
      if (!this.events || !this.continuity.mayJudge(performance.now())) return;
      for (const stalled of await this.endStalled()) this.events.stalled(stalled);
    } catch (error) {
      this.events?.problem("could not write this instance's heartbeat or end a stalled instance's connections", error);
    }
  }

  /**
   * Ends every connection of the stalled instances, and forgets instances long gone. Times are the database's own
   * (now()), so the instances' clocks do not matter.
   */
  private async endStalled(): Promise<StalledInstance[]> {
    const ended = await this.database.query<StalledInstance>(endStalled(this.instance, minStalledMs, unsetStalledMs));
    await this.database.query(forgetGone(forgetAfterMs));
    return ended.filter((stalled) => stalled.connections > 0);
  }

  /** Stops beating and removes this instance's row, after any beat under way: it is gone, not stalled. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.tick;
    await this.database.query(deleteInstance(this.instance)).catch(() => {});
  }
}
