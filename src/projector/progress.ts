import { randomUUID } from 'node:crypto';
import type { Db } from '../postgres/db.ts';
import type { Position } from '../eventstore/port.ts';
import { appliedKey, PROGRESS_CHANNEL } from './checkpoints.ts';

// waitFor(position): resolves when every follower the read side depends on
// (each projection and the audit sealer) has processed the position. Woken by
// local reports and by NOTIFY from other processes, with polling as fallback.

const POLL_MS = 100;

export class Progress {
  private readonly positions = new Map<string, Position>();
  private waiters = new Set<() => void>();
  private stopListening: (() => Promise<void>) | undefined;
  private poller: NodeJS.Timeout | undefined;
  /** Names this process in the NOTIFYs of its inline commits, whose positions it has already reported. */
  readonly origin = `inline:${randomUUID()}`;

  constructor(
    private readonly db: Db,
    private readonly required: readonly string[],
  ) {}

  async start(): Promise<void> {
    await this.refresh();
    this.stopListening = await this.db.listen(PROGRESS_CHANNEL, (payload) => {
      if (payload !== this.origin) void this.refresh();
    });
    this.poller = setInterval(() => {
      if (this.waiters.size > 0) void this.refresh();
    }, POLL_MS);
    this.poller.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.poller);
    await this.stopListening?.();
    for (const w of this.waiters) w();
  }

  /** Bumped when the positions were forgotten (rewind): a position seen before may name another event now. */
  epoch = 0;

  /**
   * Forgets every position (the database lost commits this process had seen:
   * positions past its head will be taken again by other events) and reads the
   * checkpoint rows again.
   */
  async rewind(): Promise<void> {
    this.epoch++;
    this.positions.clear();
    this.rows.clear();
    await this.refresh();
  }

  /** The last known position of one follower. */
  position(name: string): Position | undefined {
    return this.positions.get(name);
  }

  private readonly rows = new Map<string, Position>();

  /** The last known value of a follower's checkpoint row (read from it, or written by this process). */
  rowPosition(name: string): Position | undefined {
    return this.rows.get(name);
  }

  /** A follower's checkpoint row was written (committed) at `position`. */
  reportRow(name: string, position: Position): void {
    const cur = this.rows.get(name);
    if (cur === undefined || position > cur) this.rows.set(name, position);
    this.report(name, position);
  }

  /** A follower in this process moved. */
  report(name: string, position: Position): void {
    const cur = this.positions.get(name);
    if (cur === undefined || position > cur) this.positions.set(name, position);
    this.wake();
  }

  private async refresh(): Promise<void> {
    try {
      const { rows } = await this.db.query<{ name: string; position: string; applied_position: string }>('SELECT name, position, applied_position FROM checkpoints WHERE name = ANY($1)', [this.required]);
      for (const r of rows) {
        this.reportRow(r.name, r.position);
        this.report(appliedKey(r.name), r.applied_position);
      }
    } catch {
      // The next poll tries again.
    }
  }

  private wake(): void {
    for (const w of this.waiters) w();
  }

  /** The lowest position every required follower has passed ('' when one has not started). */
  low(): Position {
    let low: Position | undefined;
    for (const name of this.required) {
      const p = this.positions.get(name) ?? '';
      if (low === undefined || p < low) low = p;
    }
    return low ?? '';
  }

  /** True when caught up to `position` within `timeoutMs`; false on timeout. */
  waitFor(position: Position, timeoutMs: number): Promise<boolean> {
    return this.until(() => this.low() >= position, timeoutMs);
  }

  /** True when one follower has passed `position` within `timeoutMs`. */
  waitForOne(name: string, position: Position, timeoutMs: number): Promise<boolean> {
    return this.until(() => (this.positions.get(name) ?? '') >= position, timeoutMs);
  }

  private async until(done: () => boolean, timeoutMs: number): Promise<boolean> {
    if (done()) return true;
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.waiters.delete(done);
          resolve();
        };
        const timer = setTimeout(done, Math.min(left, POLL_MS * 5));
        this.waiters.add(done);
      });
    }
    return true;
  }
}
