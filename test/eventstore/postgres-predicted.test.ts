import t from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { getProject } from '../../projections/org.ts';
import { auditStream, type AuditEntry } from '../../src/audit/chain.ts';
import { verifyOrgChain } from '../../src/audit/verifier.ts';
import { handleCommand } from '../../src/eventstore/handler.ts';
import { WrongExpectedRevision } from '../../src/eventstore/port.ts';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { openDb } from '../../src/postgres/db.ts';
import { testLedger } from '../helpers/ledger.ts';

// A batch whose landing this process can predict (its own last commit is the
// log's last one) goes in one round trip: the append, the followers'
// statements built on the predicted events, and the COMMIT travel together,
// and the database refuses the whole transaction unless the batch landed
// exactly as predicted. A prediction that misses writes nothing; the batch
// then goes the ordinary way.

// Its evidence is the version 1 entry sealed in the same round trip (the entry's predicted envelope), so the chain stays version 1.
const ledger = await testLedger(t, { checkpointEveryEntries: 1000, auditFormat: 1 });
const store = ledger.store as PostgresEventStore;
// What happens outside this process (another process's appends, a lock held,
// the observer of pg_stat_activity) goes through a pool of its own.
const outside = openDb(ledger.url, { max: 4 });
t.teardown(() => outside.close());
const errors: unknown[] = [];
store.onInlineError = (err) => errors.push(err);
const org = 'org_predicted';
const createProject = (id: string, via = store) =>
  handleCommand(via, orgDecider, orgStream(org), { type: 'create_project', projectId: id, name: id, slug: id.replace(/_/g, '-'), environment: 'test', settings: {} }, ledger.ctx(org));

await ledger.run(orgDecider, orgStream(org), { type: 'create_org', orgId: org, name: 'Predicted', defaultProjectId: 'prj_pred_default', owner: { userId: 'usr_pred', email: 'p@example.com', displayName: null } }, ledger.ctx(org));
// Warm until a batch lands predicted with the read side settled (one may miss
// while the read side's runners hand over to the inline followers at start).
for (let i = 0, landed = store.predictions.landed; store.predictions.landed === landed; i++) {
  if (i === 20) throw new Error(`no batch landed predicted: ${JSON.stringify(store.predictions)}`);
  await ledger.settle();
  await createProject(`prj_pred_warm_${i}`);
}

/** Backends of this database waiting for a lock (bounded wait on the condition). */
async function waitForLockWaiters(n: number): Promise<void> {
  for (let i = 0; i < 2_000; i++) {
    const { rows } = await outside.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`);
    if (rows[0]!.n >= n) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`never saw ${n} backends waiting for a lock`);
}

t.test('a batch predicted from this process’s last commit lands in one round trip, sealed and projected as the ordinary way would', async (t) => {
  const before = { ...store.predictions };
  const r = await createProject('prj_pred_1');
  t.equal(store.predictions.landed, before.landed + 1, 'the batch landed as predicted');
  t.equal(store.predictions.missed, before.missed);
  t.ok(await ledger.readSide.waitFor(r.lastPosition!, 60_000));
  t.match(await getProject(ledger.db, org, 'prj_pred_1'), { id: 'prj_pred_1' });
  // The event's recorded_at (chosen by the service, checked by the database) is the one its audit entry hashed.
  const [event] = (await store.readStream(orgStream(org), { direction: 'backwards', maxCount: 1 }));
  const [sealed] = await store.readStream(auditStream(org), { direction: 'backwards', maxCount: 1 });
  const entry = sealed!.data as unknown as AuditEntry;
  t.equal(entry.source.event_id, event!.id);
  t.equal(JSON.parse(entry.envelope).recorded_at, event!.recordedAt);
  t.equal(sealed!.position > event!.position, true, 'the entry follows its event in the log');
  const report = await verifyOrgChain(store, org, ledger.key, ledger.origin);
  t.ok(report.ok, JSON.stringify(report.problems ?? report).slice(0, 300));
  t.same(errors, []);
});

t.test('appends to one stream in one batch: the refusal is predicted, the batch still lands in one round trip', async (t) => {
  const meta = { org_id: org };
  await store.appendToStream('probe-pred1', [{ type: 'test.noted', data: { n: 0 }, metadata: meta }], { expectedRevision: 'no_stream' });
  const before = { ...store.predictions };
  const results = await Promise.allSettled([
    store.appendToStream('probe-pred1', [{ type: 'test.noted', data: { n: 1 }, metadata: meta }], { expectedRevision: 0n }),
    store.appendToStream('probe-pred1', [{ type: 'test.noted', data: { n: 2 }, metadata: meta }], { expectedRevision: 0n }),
  ]);
  t.equal(results[0].status, 'fulfilled');
  t.equal(results[1].status, 'rejected');
  t.ok((results[1] as PromiseRejectedResult).reason instanceof WrongExpectedRevision);
  t.equal(store.predictions.landed, before.landed + 1);
  t.equal(store.predictions.missed, before.missed);
  const events = await store.readStream('probe-pred1');
  t.same(events.map((e) => (e.data as { n: number }).n), [0, 1]);
  await ledger.settle();
  t.ok((await verifyOrgChain(store, org, ledger.key, ledger.origin)).ok);
});

t.test('another process appended before the predicted batch took the lock: the prediction misses, nothing of it is written, the batch lands the ordinary way', async (t) => {
  const other = await PostgresEventStore.open(outside);
  t.teardown(() => other.close());
  // Warm: this process's last commit is the log's last one, so its next batch is predicted.
  await createProject('prj_pred_2');
  const before = { ...store.predictions };
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  // Hold the log-head lock, so the other process's append and then ours wait in that order.
  const holding = outside.transaction(async (tx) => {
    await tx.query('SELECT position FROM es_log_head WHERE id = 1 FOR UPDATE');
    await released;
  });
  const foreign = createProject('prj_pred_other', other);
  await waitForLockWaiters(1);
  const ours = createProject('prj_pred_3');
  await waitForLockWaiters(2);
  release();
  await holding;
  const [f, o] = await Promise.all([foreign, ours]);
  // Ours missed (another may, while the read side's runners hand the other process's event over to the inline followers).
  t.ok(store.predictions.missed >= before.missed + 1, 'the prediction missed');
  t.ok(f.lastPosition! < o.lastPosition!, 'the other process’s event came first');
  t.ok(await ledger.readSide.waitFor(o.lastPosition!, 60_000));
  for (const id of ['prj_pred_other', 'prj_pred_3']) t.match(await getProject(ledger.db, org, id), { id }, `${id} visible`);
  const created = (await store.readStream(orgStream(org))).filter((e) => e.type === 'project.created');
  t.same(
    created.map((e) => (e.data as { project_id: string }).project_id).slice(-3),
    ['prj_pred_2', 'prj_pred_other', 'prj_pred_3'],
    'each event once, in order',
  );
  await ledger.settle();
  const report = await verifyOrgChain(store, org, ledger.key, ledger.origin);
  t.ok(report.ok, JSON.stringify(report.problems ?? report).slice(0, 300));
  // Batches are predicted again once this process has learnt where the log and the followers stand.
  for (let i = 0; store.predictions.landed === before.landed; i++) {
    if (i === 20) throw new Error(`never predicted again: ${JSON.stringify(store.predictions)}`);
    await ledger.settle();
    await createProject(`prj_pred_again_${i}`);
  }
  t.pass('predicting again');
  t.same(errors, []);
});
