import type { EventStore, Position, RecordedEvent } from '../eventstore/port.ts';
import { PostgresEventStore } from '../eventstore/postgres.ts';
import type { Db, Queryable } from '../postgres/db.ts';
import { advanceCheckpoint, appliedKey, ensureCheckpoint, readCheckpoint, recordFailure } from './checkpoints.ts';
import { batches } from './follow.ts';
import type { Progress } from './progress.ts';
import { type BatchOptions, liveTables, type Projection, shadowTables, type TableNames } from './projection.ts';
import { migrate } from '../postgres/schema.ts';

// The projection runtime. Each projection follows the log on its own: it
// writes its rows and its checkpoint in one transaction per batch, advances
// past events it ignores, and on a real failure stops with the position and
// the error recorded (shown by `projections status`), never skipping silently.

/**
 * A rebuild's page. Small pages, one read ahead, keep few events alive at a
 * time: 1 000 and one ahead rebuilt 50 000 events in 0.47–0.54 s against
 * 0.60–0.67 s for 5 000 and two ahead (the same at 200 000); 500 was slower
 * (docs/performance.md, ninth round).
 */
export const REBUILD_PAGE = 1_000;
/** Pages a rebuild reads ahead of the one being applied. */
const REBUILD_AHEAD = 1;
/** How often a follower's position over ignored events is written down. */
export const CHECKPOINT_FLUSH_MS = 200;

export async function ensureTables(db: Queryable, p: Projection, t: TableNames): Promise<void> {
  for (const [logical, ddl] of Object.entries(p.tables)) {
    const physical = t[logical]!;
    const { rows } = await db.query<{ exists: boolean }>('SELECT to_regclass($1) IS NOT NULL AS exists', [physical]);
    if (rows[0]!.exists) continue;
    await db.query(ddl(physical));
  }
}

async function applyEach(tx: Queryable, p: Projection, events: readonly RecordedEvent[], t: TableNames): Promise<void> {
  for (const e of events) {
    try {
      await p.apply(tx, e, t);
    } catch (err) {
      throw new ApplyError(e.position, err);
    }
  }
}

/**
 * Applies the handled events of a batch: set-based when the projection can,
 * inside a savepoint, falling back to one by one (which names the failing
 * event) if the set-based form fails.
 */
export async function applyBatch(tx: Queryable, p: Projection, events: readonly RecordedEvent[], t: TableNames, opts: BatchOptions = {}): Promise<void> {
  const handled = events.filter((e) => p.eventTypes.has(e.type));
  if (handled.length === 0) return;
  if (!p.applyBatch || handled.length === 1) return applyEach(tx, p, handled, t);
  await tx.query('SAVEPOINT apply_batch');
  try {
    await p.applyBatch(tx, handled, t, opts);
    await tx.query('RELEASE SAVEPOINT apply_batch');
  } catch {
    await tx.query('ROLLBACK TO SAVEPOINT apply_batch');
    await applyEach(tx, p, handled, t);
  }
}

/** Whether the projection applies these (handled) events by statements all issued before any answer (Projection.pipelined). */
export function isPipelined(p: Projection, handled: readonly RecordedEvent[], opts?: BatchOptions): boolean {
  return p.applyBatch !== undefined && p.pipelined?.(handled, opts) === true;
}

/**
 * The same without a savepoint, where a failure rolls the whole transaction
 * back and the caller applies the batch again another way: inside the append
 * transaction (inline followers: the batch is written again without them,
 * and their runners apply it with the fallback above), and a rebuild's bulk
 * phase (the part is applied again one by one).
 */
export async function applyInline(tx: Queryable, p: Projection, events: readonly RecordedEvent[], t: TableNames, opts: BatchOptions = {}): Promise<void> {
  const handled = events.filter((e) => p.eventTypes.has(e.type));
  if (handled.length === 0) return;
  if (!p.applyBatch || (handled.length === 1 && !isPipelined(p, handled, opts))) return applyEach(tx, p, handled, t);
  await p.applyBatch(tx, handled, t, opts);
}

class ApplyError extends Error {
  constructor(
    readonly position: Position,
    readonly original: unknown,
  ) {
    super(original instanceof Error ? original.message : String(original));
  }
}

/** Whether `position` lies past the head of the log (Postgres store on this database; false when it cannot tell). */
export async function pastHead(db: Db, store: EventStore, tx: Queryable, position: Position): Promise<boolean> {
  const log = store instanceof PostgresEventStore ? store.readerIn(db, tx) : undefined;
  return log !== undefined && position > (await log.headPosition());
}

export type RunnerState = { name: string; status: 'running' | 'failed' | 'stopped'; position: Position; error?: string };

export class ProjectionRunner {
  private abort = new AbortController();
  private loop: Promise<void> | undefined;
  state: RunnerState;

  constructor(
    private readonly db: Db,
    private readonly store: EventStore,
    readonly projection: Projection,
    private readonly progress?: Progress,
  ) {
    this.state = { name: projection.name, status: 'stopped', position: '' };
  }

  async start(): Promise<void> {
    const p = this.projection;
    await migrate(this.db, async (tx) => {
      await ensureTables(tx, p, liveTables(p));
      await ensureCheckpoint(tx, p.name, 'projection', p.version);
    });
    const cp = (await readCheckpoint(this.db, p.name))!;
    if (cp.version !== p.version) {
      // A new version projects into fresh tables from position 0 and takes over once caught up.
      await rebuildProjection(this.db, this.store, p);
    }
    this.abort = new AbortController();
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
    if (this.state.status === 'running') this.state.status = 'stopped';
  }

  private async run(): Promise<void> {
    const p = this.projection;
    const t = liveTables(p);
    const signal = this.abort.signal;
    while (!signal.aborted) {
      const cp = (await readCheckpoint(this.db, p.name).catch(() => undefined)) ?? undefined;
      if (!cp) {
        await new Promise((r) => setTimeout(r, 250));
        continue;
      }
      // `persisted` is the checkpoint row; `pos` may run ahead of it over batches
      // this projection ignores, which need no transaction: the row catches up on
      // the next applied batch or the periodic flush. Replaying ignored events
      // after a restart changes nothing.
      let persisted = cp.position;
      let pos = persisted;
      let queue: Promise<unknown> = Promise.resolve();
      const serial = <T>(fn: () => Promise<T>): Promise<T> => {
        const run = queue.then(fn);
        queue = run.catch(() => {});
        return run;
      };
      const flush = () =>
        serial(async () => {
          if (pos <= persisted) return;
          // The row is already there (moved inline, or by another process): nothing to write.
          const row = this.progress?.rowPosition(p.name) ?? '';
          if (row >= pos) {
            persisted = row;
            return;
          }
          const target = pos;
          await this.db.transaction(async (tx) => {
            const now = await readCheckpoint(tx, p.name, true);
            if (!now || now.version !== p.version || now.position < persisted) return;
            // Never past the log's head: a position read before the database lost commits (src/recovery.ts).
            if (await pastHead(this.db, this.store, tx, target)) return;
            if (now.position < target) await advanceCheckpoint(tx, p.name, target);
            persisted = now.position < target ? target : now.position;
          });
        });
      const flusher = setInterval(() => void flush().catch(() => {}), CHECKPOINT_FLUSH_MS);
      this.state = { name: p.name, status: 'running', position: pos };
      this.progress?.report(p.name, pos);
      this.progress?.report(appliedKey(p.name), cp.applied_position);
      const inner = new AbortController();
      const onAbort = () => inner.abort();
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        for await (const batch of batches(this.store, pos, inner.signal)) {
          const last = batch[batch.length - 1]!.position;
          // Events already processed (inline, in their append transaction, or
          // by another process) need no transaction here.
          const known = this.progress?.position(p.name) ?? '';
          const unseen = known > pos ? batch.filter((e) => e.position > known) : batch;
          if (unseen.some((e) => p.eventTypes.has(e.type))) {
            const moved = await serial(() =>
              this.db.transaction(async (tx) => {
                const now = await readCheckpoint(tx, p.name, true);
                if (!now || now.version !== p.version) return false;
                let events = unseen;
                if (now.position !== persisted) {
                  // Moved forward by someone else (inline followers, another process, a rebuild swap): adopt it and
                  // apply only what lies beyond; moved in any other way: resync.
                  if (now.position < persisted || now.status !== 'running') return false;
                  persisted = now.position;
                  events = unseen.filter((e) => e.position > now.position);
                  if (events.length === 0) return true;
                }
                await applyBatch(tx, p, events, t);
                await advanceCheckpoint(tx, p.name, last, { applied: true });
                persisted = last;
                return true;
              }),
            );
            if (!moved) break;
            if (persisted === last) this.progress?.report(appliedKey(p.name), last);
          }
          pos = last;
          this.state.position = pos;
          this.progress?.report(p.name, pos);
        }
        await flush().catch(() => {});
      } catch (err) {
        if (err instanceof ApplyError) {
          const msg = err.message;
          await recordFailure(this.db, p.name, err.position, msg).catch(() => {});
          this.state = { name: p.name, status: 'failed', position: pos, error: msg };
          return;
        }
        // Transport or database trouble: back off and resume from the checkpoint.
        await new Promise((r) => setTimeout(r, 250));
      } finally {
        clearInterval(flusher);
        inner.abort();
        signal.removeEventListener('abort', onAbort);
      }
    }
  }
}

export type RebuildProgress = { processed: number; position: Position; head: Position };

/**
 * Projects the whole log into fresh tables and swaps them in. The final catch-up
 * and the swap run in one transaction holding the checkpoint row, so the live
 * runner pauses for the swap and resumes from the rebuilt position.
 */
export async function rebuildProjection(db: Db, store: EventStore, p: Projection, onProgress?: (r: RebuildProgress) => void, opts: { pageSize?: number } = {}): Promise<RebuildProgress> {
  const pageSize = opts.pageSize ?? REBUILD_PAGE;
  const shadow = shadowTables(p);
  const live = liveTables(p);
  // Only the events the projection handles leave the store (most of a log is
  // other families' events and the audit chain's own).
  const handled = { eventTypes: [...p.eventTypes] };
  // A read left pending when the loop stops must not reject unobserved.
  const read = (after: Position) => {
    const r = store.readAll({ after, maxCount: pageSize, filter: handled });
    r.catch(() => {});
    return r;
  };
  let pos: Position = '';
  let processed = 0;
  // Dropped first, so each is made anew: every statement issued at once (the transaction pipelines).
  const makeShadow = () =>
    db.transaction((tx) =>
      Promise.all([
        ...Object.values(shadow).map((name) => tx.query(`DROP TABLE IF EXISTS ${name}`)),
        ...Object.entries(p.tables).map(([logical, ddl]) => tx.query(ddl(shadow[logical]!))),
      ]),
    );
  // The first page is read while the shadow tables are made (their DDL in one
  // transaction, one commit rather than one per statement).
  let next = read(pos);
  const [head] = await Promise.all([store.headPosition(), makeShadow(), ensureCheckpoint(db, p.name, 'projection', p.version)]);
  const seq = p.pipelined ? db.sequence() : undefined;
  // Bulk phase: pages of the log straight into the shadow tables, reading the
  // next pages (at most REBUILD_AHEAD) while one is written.
  //  - A page is applied in one transaction whose statements all travel in
  //    one round trip (the set-based form, pipelined): on two cores, one such
  //    connection beside the reads was faster than several connections or
  //    COPY, whose round trips wait on the same thread (docs/performance.md,
  //    ninth round).
  //  - Each event is applied once, in order, to tables holding only what this
  //    pass wrote: the projection may skip its idempotency guards (`fresh`);
  //    if that fails, the page falls back to the one-by-one path.
  //  - A projection that says which fresh pages it writes without waiting
  //    for any answer (`pipelined`) has its pages sent back to back on one
  //    connection (Db.sequence): such a page's COMMIT, and the next page,
  //    follow its statements at once, so the next page is built while
  //    PostgreSQL writes this one. A page that fails there may already have
  //    pages built on it behind it: the bulk phase starts over on new shadow
  //    tables, each page answered before the next is built (below).
  //  - The bulk transactions commit without waiting for their WAL flush: the
  //    swap below commits synchronously, which flushes everything before it,
  //    and a rebuild cut short by a crash starts again from dropped tables.
  // A failure fails the rebuild; the next attempt drops the shadow tables.
  const FRESH = { fresh: true } as const;
  const handledOf = (page: readonly RecordedEvent[]) => page.filter((e) => p.eventTypes.has(e.type));
  const backToBack = (page: readonly RecordedEvent[]) =>
    seq!.transaction(
      (tx) => {
        const applying = applyInline(tx, p, page, shadow, FRESH);
        if (!isPipelined(p, handledOf(page), FRESH)) return applying;
        // Every statement is out: the COMMIT goes right behind them, and rolls back if one fails.
        applying.catch(() => {});
        return Promise.resolve();
      },
      { waitForFlush: false },
    );
  // Set-based and fresh in one transaction without a savepoint; if that fails,
  // the page is applied again one by one, with the guards, in a new one.
  const oneAfterAnother = (page: readonly RecordedEvent[]) =>
    db
      .transaction((tx) => applyInline(tx, p, page, shadow, FRESH), { waitForFlush: false })
      .catch(() => db.transaction((tx) => applyEach(tx, p, handledOf(page), shadow), { waitForFlush: false }));
  const bulk = async (pipelined: boolean) => {
    let tail: Promise<void> = Promise.resolve();
    const pageDone: Promise<void>[] = [];
    let failed: unknown;
    for (;;) {
      const page = await next;
      if (page.length === 0) break;
      const last = page[page.length - 1]!.position;
      if (page.length === pageSize) next = read(last);
      // Back to back, a page goes out once the page before it has issued its COMMIT (Db.sequence);
      // one after another, once the page before it is answered.
      const run = pipelined ? (failed === undefined ? backToBack(page) : Promise.resolve()) : tail.then(() => (failed === undefined ? oneAfterAnother(page) : undefined));
      // A failure is carried by `failed` (the tail never rejects). Pages are answered in order.
      tail = run.then(
        () => {
          processed += page.length;
          onProgress?.({ processed, position: last, head });
        },
        (err: unknown) => {
          failed ??= err;
        },
      );
      pageDone.push(tail);
      pos = last;
      if (pageDone.length > REBUILD_AHEAD) await pageDone.shift();
      if (failed !== undefined || page.length < pageSize) break;
    }
    await Promise.all(pageDone);
    if (failed !== undefined) throw failed;
  };
  try {
    if (!seq) await bulk(false);
    else {
      try {
        await bulk(true);
      } catch {
        // Started over, one page after another, once every page sent is answered.
        await seq.close();
        pos = '';
        processed = 0;
        next = read(pos);
        await makeShadow();
        await bulk(false);
      }
    }
  } finally {
    await seq?.close();
  }
  // Swap phase.
  return db.transaction(async (tx) => {
    await readCheckpoint(tx, p.name, true);
    // From here the transaction holds the checkpoint row, which the runner and
    // every append with this projection inline wait for (the appends while
    // holding the log's head and the other followers' rows, which other
    // runners wait for on connections of the pool): the log is read through
    // this transaction's own connection when it lives in this database.
    const log = (store instanceof PostgresEventStore ? store.readerIn(db, tx) : undefined) ?? store;
    // Every event up to this head was committed before the reads below, which
    // therefore return each handled one: the rebuilt tables stand at this
    // head (or at the last handled event, if later), whatever it holds after
    // the last handled event.
    const swapHead = await log.headPosition();
    for (;;) {
      const page = await log.readAll({ after: pos, maxCount: pageSize, filter: handled });
      if (page.length === 0) break;
      await applyBatch(tx, p, page, shadow);
      pos = page[page.length - 1]!.position;
      processed += page.length;
    }
    if (swapHead > pos) pos = swapHead;
    for (const [logical, physical] of Object.entries(shadow)) {
      await tx.query(`DROP TABLE IF EXISTS ${live[logical]}`);
      await tx.query(`ALTER TABLE ${physical} RENAME TO ${live[logical]}`);
    }
    await tx.query(`UPDATE checkpoints SET version = $2 WHERE name = $1`, [p.name, p.version]);
    await advanceCheckpoint(tx, p.name, pos, { applied: true });
    const done = { processed, position: pos, head: pos > head ? pos : head };
    onProgress?.(done);
    return done;
  });
}

