import t, { type Test } from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { getProject } from '../../projections/org.ts';
import { generateSigningKey } from '../../src/audit/note.ts';
import { verifyOrgChain } from '../../src/audit/verifier.ts';
import { handleCommand } from '../../src/eventstore/handler.ts';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { openDb } from '../../src/postgres/db.ts';
import { startReadSide } from '../../src/readside.ts';
import { testDatabase } from '../helpers/db.ts';
import { ev } from './conformance.ts';
import { OutcomeUnknown } from '../../src/eventstore/port.ts';
import { LossyProxy } from '../helpers/lossy-proxy.ts';

// The answer to a write can be lost after PostgreSQL executed it (the
// connection breaks while the answer is on its way). The store must then find
// out whether the append is in the log, by its event ids, and answer
// accordingly: never report a written append as failed, never write it twice.
//
const { url, db } = await testDatabase(t);
const direct = new URL(url);
const proxy = await LossyProxy.start({ host: direct.hostname, port: Number(direct.port) });
const viaProxy = new URL(url);
viaProxy.port = String(proxy.port);
t.teardown(() => proxy.stop());

/** A store whose connections go through the proxy. */
async function proxiedStore(t: Test): Promise<PostgresEventStore> {
  const pdb = openDb(viaProxy.toString(), { max: 3 });
  const store = await PostgresEventStore.open(pdb);
  t.teardown(async () => {
    await store.close();
    await pdb.close();
  });
  return store;
}

t.test('the answer to a written append is lost: answered from the log, written once', async (t) => {
  const store = await proxiedStore(t);
  const s = `lost-${Date.now()}`;
  proxy.arm('SELECT');
  const r = await store.appendToStream(s, [ev('test.lost', { n: 1 })], { expectedRevision: 'no_stream' });
  t.equal(proxy.lost, 1, 'the answer was lost on the way');
  t.equal(r.nextExpectedRevision, 0n);
  const logged = await (await PostgresEventStore.open(db)).readStream(s);
  t.equal(logged.length, 1, 'in the log once');
  t.equal(logged[0]!.position, r.lastPosition, 'answered with its position');
  // The store goes on: the next append on a fresh connection.
  t.equal((await store.appendToStream(s, [ev('test.lost', { n: 2 })], { expectedRevision: 0n })).nextExpectedRevision, 1n);
});

t.test('the COMMIT answer of an append transaction with inline followers is lost: the command is acknowledged once and read back', async (t) => {
  const pdb = openDb(viaProxy.toString(), { max: 5 });
  const store = await PostgresEventStore.open(pdb);
  const key = generateSigningKey('lost');
  const readSide = await startReadSide(pdb, store, { signingKey: key, origin: 'test/audit' }, undefined, { reactors: false });
  t.teardown(async () => {
    await readSide.stop();
    await store.close();
    await pdb.close();
  });
  const org = 'org_lost_answer';
  const ctx = { orgId: org, projectId: null, actor: { kind: 'user' as const, id: 'usr_lost' }, requestId: null, now: () => new Date('2026-11-24T10:00:00.000Z') };
  await handleCommand(store, orgDecider, orgStream(org), { type: 'create_org', orgId: org, name: 'Lost', defaultProjectId: 'prj_lost_default', owner: { userId: 'usr_lost', email: 'l@example.com', displayName: null } }, ctx);
  await readSide.waitFor(await store.headPosition(), 60_000);
  // Warm until a batch lands predicted with the read side settled (one may
  // miss while its runners hand over to the inline followers): the next batch
  // then goes predicted too.
  for (let i = 0; ; i++) {
    if (i === 20) throw new Error(`no batch landed predicted: ${JSON.stringify(store.predictions)}`);
    await readSide.waitFor(await store.headPosition(), 60_000);
    const landed = store.predictions.landed;
    await handleCommand(store, orgDecider, orgStream(org), { type: 'create_project', projectId: `prj_warm_${i}`, name: `Warm ${i}`, slug: `warm-${i}`, environment: 'test', settings: {} }, ctx);
    if (store.predictions.landed > landed) break;
  }
  // The COMMIT of the predicted append's own transaction (not the read side's runners').
  // The arming waits for a predicted batch: one that goes the ordinary way
  // (another append, such as the sealer's own, moved the log in between)
  // loses nothing, and the next command tries again. So does a predicted
  // batch that missed (its COMMIT, pipelined behind the failed statement, was
  // a rollback: its lost answer changes nothing): armed again.
  let r: Awaited<ReturnType<typeof handleCommand>> | undefined;
  let lostId = '';
  let lostBefore = proxy.lost;
  proxy.arm('COMMIT', 'es_append_predicted');
  for (let i = 1; store.predictions.unknown === 0; i++) {
    if (i > 40) throw new Error(`no predicted batch lost its COMMIT answer in 40 commands: ${JSON.stringify(store.predictions)}`);
    if (proxy.lost > lostBefore) {
      lostBefore = proxy.lost;
      proxy.arm('COMMIT', 'es_append_predicted');
    }
    lostId = `prj_lost_${i}`;
    r = await handleCommand(store, orgDecider, orgStream(org), { type: 'create_project', projectId: lostId, name: `Lost ${i}`, slug: `lost-${i}`, environment: 'test', settings: {} }, ctx);
  }
  t.equal(proxy.lost, lostBefore + 1, 'the COMMIT answer was lost on the way');
  t.equal(store.predictions.unknown, 1, 'it was a predicted batch whose COMMIT answer was lost');
  t.ok(r!.changed && r!.lastPosition, 'acknowledged');
  t.ok(await readSide.waitFor(r!.lastPosition!, 60_000), 'the read side has it');
  t.ok(await getProject(db, org, lostId));
  const created = (await (await PostgresEventStore.open(db)).readStream(orgStream(org))).filter((e) => e.type === 'project.created' && (e.data as { project_id: string }).project_id === lostId);
  t.equal(created.length, 1, 'decided and written once');
  const report = await verifyOrgChain(store, org, key, 'test/audit');
  t.ok(report.ok, `sealed once, the chain verifies: ${JSON.stringify(report.problems).slice(0, 300)}`);
  // And the store goes on.
  const next = await handleCommand(store, orgDecider, orgStream(org), { type: 'create_project', projectId: 'prj_after_loss', name: 'After', slug: 'after-loss', environment: 'test', settings: {} }, ctx);
  t.ok(await readSide.waitFor(next.lastPosition!, 60_000));
  t.ok(await getProject(db, org, 'prj_after_loss'));
});

t.test('the answer is lost and the lookup fails too: the append is refused as OutcomeUnknown, never retried blind', async (t) => {
  const store = await proxiedStore(t);
  const s = `unknown-${Date.now()}`;
  const lostBefore = proxy.lost;
  proxy.arm('SELECT');
  proxy.block('WHERE event_id = ANY');
  const err = await store.appendToStream(s, [ev('test.unknown', { n: 1 })], { expectedRevision: 'no_stream' }).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.equal(proxy.lost, lostBefore + 1, 'the answer was lost');
  t.equal(proxy.refused, 1, 'the lookup never reached the server');
  t.ok(err instanceof OutcomeUnknown, 'refused as OutcomeUnknown');
  t.equal((err as OutcomeUnknown).code, 'store_unavailable');
  const logged = await (await PostgresEventStore.open(db)).readStream(s);
  t.equal(logged.length, 1, 'it was written, once: the store did not try again');
});
