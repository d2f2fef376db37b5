import type { InlineFollower, InlineTx } from '../eventstore/postgres.ts';
import type { Position, RecordedEvent } from '../eventstore/port.ts';
import type { Sealer } from '../audit/sealer.ts';
import { SEALER_NAME } from '../audit/sealer.ts';
import { appliedKey, PROGRESS_CHANNEL } from './checkpoints.ts';
import type { Progress } from './progress.ts';
import { applyInline, isPipelined } from './runner.ts';
import { liveTables, type Projection } from './projection.ts';

// Inline followers (Postgres event store only): in the append transaction
// itself, after the batch's events and under the log-head row lock, the audit
// sealer seals the batch and every projection applies it (business events and
// the audit entries just written), and all their checkpoints move to the new
// head in one statement. One transaction, one commit, one WAL flush per batch;
// a request waiting for its position is answered as soon as the batch commits.
//
// Only followers whose checkpoint stands exactly at the head before the batch
// (caught up, running, same version) take part; the others are left to their
// asynchronous runner, which catches them up from their checkpoint and hands
// over once it reaches the head (the checkpoint rows are locked FOR UPDATE
// here and by the runners, so the hand-over is a compare-and-set). It is the
// same code (`apply`/`applyBatch`, `Sealer.sealOrg`) as the asynchronous path,
// on the same events, so both produce the same rows and chains.

const MOVE_CHECKPOINTS = `WITH moved AS (UPDATE checkpoints SET position = $1, applied_position = CASE WHEN name = ANY($2::text[]) THEN $1 ELSE applied_position END,
    status = 'running', error = NULL, error_position = NULL, updated_at = now() WHERE name = ANY($3::text[]) RETURNING 1)
  SELECT pg_notify($4, $5) FROM (SELECT count(*) FROM moved) m`;

// The rows prepare locks, and a failure unless the followers standing at the
// head (of those this process runs) are exactly the predicted ones.
const CHECK_CHECKPOINTS = `WITH locked AS MATERIALIZED (SELECT name, position, version, status FROM checkpoints WHERE name = ANY($1) ORDER BY name FOR UPDATE)
  SELECT es_expect(count(*) = cardinality($5::text[]) AND coalesce(bool_and(l.name = ANY($5::text[])), true), 'es_prediction_missed')
  FROM locked l JOIN unnest($2::text[], $3::int[]) AS v(name, version) ON v.name = l.name
  WHERE l.position = $4 AND l.status = 'running' AND (v.version IS NULL OR l.version = v.version)`;

export function inlineFollower(projections: readonly Projection[], sealer: Sealer, progress: Progress, isRunning: (name: string) => boolean): InlineFollower {
  const byName = new Map(projections.map((p) => [p.name, p]));
  const names = [...projections.map((p) => p.name), SEALER_NAME];
  type Row = { name: string; position: string; version: number; status: string };
  // The checkpoint rows, locked right behind the batch's append (same round trip).
  const prepare = (tx: InlineTx) =>
    tx.query<Row>('SELECT name, position, version, status FROM checkpoints WHERE name = ANY($1) ORDER BY name FOR UPDATE', [names], { name: 'inline_lock_checkpoints' });
  // The followers this process's last inline commit moved, and the head it moved them to.
  let standing: { names: string[]; head: Position } | undefined;
  const localOk = (name: string) => isRunning(name) && (name === SEALER_NAME ? sealer.running : byName.has(name));
  const predict = (before: Position) => {
    if (!standing || standing.head !== before) return undefined;
    const eligible = names.filter(localOk);
    const caught = standing.names.filter(localOk);
    if (caught.length === 0) return undefined;
    const version = (name: string) => (name === SEALER_NAME ? null : byName.get(name)!.version);
    const rows: Row[] = caught.map((name) => ({ name, position: before, version: version(name) ?? 0, status: 'running' }));
    return {
      prepared: { rows },
      // Locks the rows as prepare does; fails unless exactly the predicted followers stand at `before`.
      check: (tx: InlineTx) => tx.query(CHECK_CHECKPOINTS, [names, eligible, eligible.map(version), before, caught], { name: 'inline_check_checkpoints' }),
    };
  };
  const run = async (tx: InlineTx, before: Position, events: RecordedEvent[], prepared: unknown, opts: { final?: boolean } = {}) => {
    const { rows } = prepared as Awaited<ReturnType<typeof prepare>>;
    const caught = rows.filter((r) => {
      if (r.position !== before || r.status !== 'running' || !isRunning(r.name)) return false;
      if (r.name === SEALER_NAME) return sealer.running;
      return byName.get(r.name)?.version === r.version;
    });
    if (caught.length === 0) return;
    // Each projection writes only its own tables, so they apply together: their
    // statements go out back to back on the one (pipelined) connection.
    // `issued`: settled once every statement of theirs is issued (answered, for
    // a projection that waits for answers between its statements).
    const issueAll = (evs: readonly RecordedEvent[]): { names: string[]; done: Promise<void>; issued: Promise<void> } => {
      const applying = caught.flatMap((r) => {
        const p = byName.get(r.name);
        return p && evs.some((e) => p.eventTypes.has(e.type)) ? [p] : [];
      });
      const runs = applying.map((p) => ({ p, done: applyInline(tx, p, evs, liveTables(p)) }));
      const firstFailure = (results: PromiseSettledResult<void>[]) => {
        const failed = results.find((r) => r.status === 'rejected');
        if (failed) throw (failed as PromiseRejectedResult).reason;
      };
      const done = Promise.allSettled(runs.map((r) => r.done)).then(firstFailure);
      const waited = runs.filter((r) => !isPipelined(r.p, evs.filter((e) => r.p.eventTypes.has(e.type))));
      const issued = Promise.allSettled(waited.map((r) => r.done)).then(firstFailure);
      issued.catch(() => {});
      return { names: applying.map((p) => p.name), done, issued };
    };
    let all = events;
    let forget: (() => void) | undefined;
    let sealedLanded: (() => void) | undefined;
    let applied: string[] | undefined;
    // Final (Sealer.sealInline): the statements are not awaited; the COMMIT goes right behind them.
    let settled: Promise<void> | undefined;
    // Final: what must be answered before the COMMIT may follow (statements a projection issues only after an answer).
    let beforeCommit: Promise<void> | undefined;
    if (caught.some((r) => r.name === SEALER_NAME)) {
      // The projections go out with the sealer's statements, on the entries as
      // they will be recorded (Sealer.sealInline; it falls back if it cannot).
      let alongside: string[] = [];
      const sealed = await sealer.sealInline(
        tx,
        events,
        (entries) => {
          const issued = issueAll([...events, ...entries]);
          alongside = issued.names;
          beforeCommit = issued.issued;
          return issued.done;
        },
        { final: opts.final === true },
      );
      forget = sealed.forget;
      sealedLanded = sealed.landed;
      if (sealed.written.length > 0) all = [...events, ...sealed.written];
      if (sealed.alongside) applied = alongside;
      settled = sealed.settled;
    }
    try {
      const head = all[all.length - 1]!.position;
      if (settled && beforeCommit) await beforeCommit;
      let appliedNames = applied;
      if (!appliedNames) {
        const issued = issueAll(all);
        await issued.done;
        appliedNames = issued.names;
      }
      // One statement moves every checkpoint and wakes waiters in other processes.
      // It is not awaited: the COMMIT goes right behind it, in the same round
      // trip (the transaction pipelines); if it fails, the COMMIT rolls back.
      const moved = tx
        .query(MOVE_CHECKPOINTS, [head, appliedNames, caught.map((r) => r.name), PROGRESS_CHANNEL, progress.origin], { name: 'inline_move_checkpoints' })
        .then(() => {});
      moved.catch(() => {});
      // In statement order, so a failure reports its first cause (the later statements only say the transaction was aborted).
      const answered = settled ? settled.then(() => moved) : moved;
      // Observed by the store after the COMMIT's answer; not an unhandled rejection meanwhile.
      answered.catch(() => {});
      return {
        settled: answered,
        landed: () => {
          sealedLanded?.();
          standing = { names: caught.map((r) => r.name), head };
        },
        committed: () => {
          for (const name of appliedNames) progress.report(appliedKey(name), head);
          for (const r of caught) progress.reportRow(r.name, head);
        },
        rolledBack: () => {
          standing = undefined;
          forget?.();
        },
      };
    } catch (err) {
      standing = undefined;
      forget?.();
      throw err;
    }
  };
  return { prepare, run, predict };
}
