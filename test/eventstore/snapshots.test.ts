import t from 'tap';
import { type MandateCommand, mandateDecider, mandateStream, type MandateState } from '../../commands/mandate.ts';
import { parseEvent } from '../../events/index.ts';
import { forgetStates, handleCommand, loadState, type CommandContext } from '../../src/eventstore/handler.ts';
import type { EventStore, NewEvent } from '../../src/eventstore/port.ts';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { attachSnapshots, serializeState, Snapshots } from '../../src/eventstore/snapshots.ts';
import { migrateCheckpoints } from '../../src/projector/checkpoints.ts';
import { Snapshotter, snapshotTarget } from '../../src/reactors/snapshotter.ts';
import { testDatabase } from '../helpers/db.ts';
import { until } from '../helpers/wait.ts';

// Snapshots beside the log: a stream grown by appends straight to the store
// (no command handler) gets a snapshot from the snapshotter; a process without
// a cached state loads from it, reading only the tail; a snapshot that does not
// match its stream (another event at its revision) is ignored and dropped.

const { db } = await testDatabase(t);
const store = await PostgresEventStore.open(db);
t.teardown(() => store.close());
await migrateCheckpoints(db);
const snapshots = await Snapshots.open(db);
attachSnapshots(store, snapshots);
const snapshotter = new Snapshotter(db, store, snapshots, [snapshotTarget(mandateDecider)], 100);

const tenant = { orgId: 'org_snap', projectId: 'prj_snap' };
const ctx: CommandContext = { orgId: tenant.orgId, projectId: tenant.projectId, actor: { kind: 'system', id: 'test' }, requestId: null, now: () => new Date('2026-11-23T12:00:00.000Z') };

/** Counts the events a store hands out through readStream. */
function counting(s: EventStore): { read: () => number; reset: () => void } {
  let n = 0;
  const orig = s.readStream.bind(s);
  s.readStream = async (...args) => {
    const r = await orig(...args);
    n += r.length;
    return r;
  };
  return { read: () => n, reset: () => (n = 0) };
}
const reads = counting(store);

async function mandateWith(id: string, spends: number): Promise<string> {
  const stream = mandateStream(id);
  const create: MandateCommand = { type: 'create', mandateId: id, tenant, consumerId: 'cns_1', agentId: 'buyer', agentDid: 'did:web:x:buyer', agentActive: true, purpose: 'p', displayName: null, intentNote: null, allowlist: ['shop@pix.example'], pinKind: 'pix-key', cap: 10n ** 12n, perTx: 1000n, currency: 'BRL', expiresAt: '2027-01-01T00:00:00.000Z' };
  await handleCommand(store, mandateDecider, stream, create, ctx);
  await handleCommand(store, mandateDecider, stream, { type: 'spend', tenant, spend: { transactionId: 'txn_0', channel: 'api', amount: 1n, currency: 'BRL', merchant: 'shop@pix.example', description: null } }, ctx);
  const [last] = await store.readStream(stream, { direction: 'backwards', maxCount: 1 });
  let spent = 1n;
  let revision = last!.revision;
  for (let written = 0; written < spends; ) {
    const k = Math.min(500, spends - written);
    const events: NewEvent[] = Array.from({ length: k }, (_, i) => {
      spent += 1n;
      return { type: last!.type, data: { ...last!.data, transaction_id: `txn_${written + i + 1}`, spent_minor: spent.toString(), remaining_minor: (10n ** 12n - spent).toString() }, metadata: last!.metadata };
    });
    revision = (await store.appendToStream(stream, events, { expectedRevision: revision })).nextExpectedRevision;
    written += k;
  }
  return stream;
}

/** The state folded from the start, without cache or snapshot. */
async function fromStart(stream: string): Promise<MandateState> {
  let s = mandateDecider.initialState();
  for (const e of await store.readStream(stream, { maxCount: 100_000 })) s = mandateDecider.evolve(s, parseEvent(e.type, e.data));
  return s;
}

t.test('the snapshotter snapshots a stream grown outside the handler; a cold load reads only the tail', async (t) => {
  const stream = await mandateWith('mdt_long', 1_500);
  t.ok(await snapshotter.waitFor(await store.headPosition(), 60_000), 'the snapshotter caught up');
  const snap = await snapshots.load(stream, mandateDecider.snapshot!);
  t.equal(snap?.revision, 1_501n, 'the snapshot stands at the end of the stream');
  // Three more events past the snapshot, then a "restart": this process forgets its folded states.
  for (let i = 0; i < 3; i++) await handleCommand(store, mandateDecider, stream, { type: 'spend', tenant, spend: { transactionId: `txn_tail_${i}`, channel: 'api', amount: 1n, currency: 'BRL', merchant: 'shop@pix.example', description: null } }, ctx);
  forgetStates(store);
  reads.reset();
  const loaded = await loadState(store, stream, mandateDecider);
  t.ok(reads.read() <= 4 + 100, `a cold load read ${reads.read()} events (the first page and the tail), not ${1_505}`);
  t.equal(loaded.revision, 1_504n);
  t.strictSame(loaded.state, await fromStart(stream), 'the same state as folded from the start');
  t.equal((loaded.state as { status: 'exists'; m: { spent: bigint } }).m.spent, 1_504n);
});

t.test('a snapshot whose event id does not match the stream is ignored, and dropped', async (t) => {
  const stream = await mandateWith('mdt_tampered', 1_200);
  t.ok(await snapshotter.waitFor(await store.headPosition(), 60_000));
  const snap = await snapshots.load(stream, mandateDecider.snapshot!);
  t.ok(snap, 'a snapshot was taken');
  // Tampered: a state that spent nothing, and another event's id at its revision.
  const forged = snap!.state as { status: 'exists'; m: Record<string, unknown> & { slots: Record<string, unknown>[] } };
  const unspent = { status: 'exists', m: { ...forged.m, spent: 0n, perTx: 1000n, slots: forged.m.slots.map((slot) => ({ ...slot, spent: 0n, perTx: 1000n })) } };
  await db.query(`UPDATE stream_snapshots SET event_id = $2, state = $3 WHERE stream = $1`, [stream, '00000000-0000-4000-8000-000000000000', serializeState(unspent)]);
  forgetStates(store);
  const loaded = await loadState(store, stream, mandateDecider);
  t.strictSame(loaded.state, await fromStart(stream), 'folded from the start instead');
  // The drop is off the command path: wait for it, bounded.
  await until(async () => (await snapshots.load(stream, mandateDecider.snapshot!))?.eventId !== '00000000-0000-4000-8000-000000000000', 'the forged snapshot dropped');
  const now = await snapshots.load(stream, mandateDecider.snapshot!);
  t.not(now?.eventId, '00000000-0000-4000-8000-000000000000', 'the forged snapshot is gone');
});

t.test('a snapshot past the end of its stream (the log went backwards) is ignored', async (t) => {
  const stream = await mandateWith('mdt_short', 10);
  await snapshots.save(stream, mandateDecider.snapshot!, 5_000n, '00000000-0000-4000-8000-000000000001', { status: 'none' });
  forgetStates(store);
  const loaded = await loadState(store, stream, mandateDecider);
  t.equal(loaded.revision, 11n);
  t.strictSame(loaded.state, await fromStart(stream));
});

t.test('a cold load that folds many events leaves a snapshot behind', async (t) => {
  const stream = await mandateWith('mdt_unseen', 1_100);
  await db.query('DELETE FROM stream_snapshots WHERE stream = $1', [stream]);
  forgetStates(store);
  await loadState(store, stream, mandateDecider);
  let snap;
  for (let i = 0; i < 100 && !snap; i++) {
    snap = await snapshots.load(stream, mandateDecider.snapshot!);
    if (!snap) await new Promise((r) => setTimeout(r, 20));
  }
  t.equal(snap?.revision, 1_101n, 'snapshotted at the revision the load reached');
});
