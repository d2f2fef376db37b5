import { type Foldable, takeSnapshot } from '../eventstore/handler.ts';
import type { SnapshotSpec } from '../eventstore/snapshots.ts';
import { type EventStore, type Position, type RecordedEvent, START } from '../eventstore/port.ts';
import type { Snapshots } from '../eventstore/snapshots.ts';
import { SNAPSHOT_EVERY_EVENTS } from '../limits.ts';
import type { Db } from '../postgres/db.ts';
import { ensureCheckpoint, readCheckpoint } from '../projector/checkpoints.ts';
import { PeriodicReactor } from './periodic.ts';

// Follows the log for the streams of deciders that opt into snapshots and
// brings a stream's snapshot up to date once its revision has moved
// SNAPSHOT_EVERY_EVENTS past it, however the events were appended (the
// command handler, an import, another instance). Off the command path, and
// bounded: a pass reads at most MAX_PAGES pages of the log, and a stream is
// folded from its own snapshot. A failure loses a snapshot, never an event:
// the handler folds from an older snapshot or from the start instead.

export const SNAPSHOTTER_NAME = 'snapshotter';

/** A decider the snapshotter serves: its opt-in, and how to bring a stream's snapshot up to date. */
export type SnapshotTarget = { spec: SnapshotSpec; take: (store: EventStore, stream: string) => Promise<boolean> };

export function snapshotTarget<State>(decider: Foldable<State>): SnapshotTarget {
  const spec = decider.snapshot;
  if (!spec) throw new Error('the decider does not opt into snapshots');
  return { spec, take: (store, stream) => takeSnapshot(store, stream, decider) };
}

const PAGE = 1000;
const MAX_PAGES = 20;

// The snapshotter is an optimisation: a pass that fails is retried on the next tick.
export class Snapshotter extends PeriodicReactor {
  private reached: Position = START;

  constructor(
    private readonly db: Db,
    private readonly store: EventStore,
    private readonly snapshots: Snapshots,
    private readonly targets: readonly SnapshotTarget[],
    private readonly every = SNAPSHOT_EVERY_EVENTS,
    intervalMs = 1_000,
  ) {
    super(intervalMs);
  }

  override async start(): Promise<void> {
    await ensureCheckpoint(this.db, SNAPSHOTTER_NAME, 'reactor', 1);
    super.start();
  }

  /** True once a pass has followed the log past `position` within `timeoutMs` (passes run now, one after another). */
  async waitFor(position: Position, timeoutMs: number): Promise<boolean> {
    const until = Date.now() + timeoutMs;
    while (this.reached < position) {
      if (Date.now() > until) return false;
      await this.tick().catch(() => new Promise((r) => setTimeout(r, 50)));
    }
    return true;
  }

  /** One pass: snapshots taken. */
  protected async pass(): Promise<number> {
    await ensureCheckpoint(this.db, SNAPSHOTTER_NAME, 'reactor', 1);
    const head = await this.store.headPosition();
    let pos = (await readCheckpoint(this.db, SNAPSHOTTER_NAME))?.position ?? START;
    // The database went backwards (src/recovery.ts): follow again from its head.
    if (pos > head) pos = head;
    let taken = 0;
    for (let pages = 0; pages < MAX_PAGES; pages++) {
      const batch = await this.store.readAll({ after: pos, maxCount: PAGE, filter: { streamPrefixes: this.targets.map((d) => d.spec.streamPrefix) } });
      taken += await this.snapshotDue(batch);
      if (batch.length > 0) pos = batch[batch.length - 1]!.position;
      // A short page read everything up to the head seen before it: the checkpoint may stand there.
      const done = batch.length < PAGE;
      if (done && pos < head) pos = head;
      // Never backwards (another instance's snapshotter shares the row), unless past the head.
      await this.db.query('UPDATE checkpoints SET position = $2, updated_at = now() WHERE name = $1 AND (position < $2 OR position > $3)', [SNAPSHOTTER_NAME, pos, head]);
      if (done) break;
    }
    if (pos > this.reached) this.reached = pos;
    return taken;
  }

  /** Snapshots every stream of the batch whose last revision there is `every` past its snapshot. */
  private async snapshotDue(batch: readonly RecordedEvent[]): Promise<number> {
    const last = new Map<string, bigint>();
    for (const e of batch) last.set(e.streamName, e.revision);
    let taken = 0;
    for (const target of this.targets) {
      // A stream not yet `every` events long needs no snapshot, nor a look at the table.
      const long = [...last].filter(([s, r]) => s.startsWith(target.spec.streamPrefix) && r + 1n >= BigInt(this.every));
      if (long.length === 0) continue;
      const have = await this.snapshots.revisions(
        long.map(([s]) => s),
        target.spec,
      );
      for (const [stream, revision] of long) {
        if (revision - (have.get(stream) ?? -1n) < BigInt(this.every)) continue;
        if (await target.take(this.store, stream).catch(() => false)) taken++;
      }
    }
    return taken;
  }
}
