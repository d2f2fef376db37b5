import t from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { getProject } from '../../projections/org.ts';
import { auditStream } from '../../src/audit/chain.ts';
import { verifyOrgChain } from '../../src/audit/verifier.ts';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { serverFault } from '../helpers/fault.ts';
import { testLedger } from '../helpers/ledger.ts';

// Inline followers move their checkpoints in the statement that travels with
// the append transaction's COMMIT. If the server refuses that round trip,
// nothing of the transaction stands; the appends are written again without
// the inline followers (once, with the same event ids), and the asynchronous
// runners bring the read side up once they can.

const ledger = await testLedger(t);
const store = ledger.store as PostgresEventStore;
const inlineErrors: unknown[] = [];
store.onInlineError = (err) => inlineErrors.push(err);

t.test('a refused COMMIT round trip: the append stands once, the read side catches up, nothing twice', async (t) => {
  const org = 'org_inline_fault';
  await ledger.run(orgDecider, orgStream(org), { type: 'create_org', orgId: org, name: 'Fault', defaultProjectId: 'prj_fault_default', owner: { userId: 'usr_fault', email: 'f@example.com', displayName: null } }, ledger.ctx(org));
  await ledger.settle();
  // A fault at the server: any update of a checkpoint is refused while it is on.
  const fault = await serverFault(ledger.db, 'checkpoints', 'UPDATE', 'checkpoint fault (test)');
  t.teardown(() => fault.remove());

  const r = await ledger.run(orgDecider, orgStream(org), { type: 'create_project', projectId: 'prj_fault_1', name: 'One', slug: 'one', environment: 'test', settings: {} }, ledger.ctx(org));
  t.ok(r.changed && r.lastPosition, 'the append was accepted');
  t.ok(inlineErrors.some((e) => /checkpoint fault/.test(String((e as Error).message))), 'the refusal was reported as an inline failure');
  t.notOk(await ledger.readSide.waitFor(r.lastPosition!, 300), 'the read side cannot move while checkpoints are refused');

  await fault.off();
  t.ok(await ledger.readSide.waitFor(r.lastPosition!, 60_000), 'caught up once the fault is gone');
  t.match(await getProject(ledger.db, org, 'prj_fault_1'), { id: 'prj_fault_1', slug: 'one' });
  const events = (await ledger.store.readStream(orgStream(org))).filter((e) => e.type === 'project.created' && (e.data as { project_id: string }).project_id === 'prj_fault_1');
  t.equal(events.length, 1, 'the event is in the log once');
  // Inline again afterwards: the next append is applied in its own transaction.
  const next = await ledger.run(orgDecider, orgStream(org), { type: 'create_project', projectId: 'prj_fault_2', name: 'Two', slug: 'two', environment: 'test', settings: {} }, ledger.ctx(org));
  t.ok(await ledger.readSide.waitFor(next.lastPosition!, 60_000));
  t.ok(await getProject(ledger.db, org, 'prj_fault_2'));
});

t.test('statements left in flight for the COMMIT fail: the batch rolls back whole, is written again without the followers, and the read side and chain catch up', async (t) => {
  // Checkpoints far apart, so sealing takes its one-round-trip path with the COMMIT right behind.
  const quiet = await testLedger(t, { checkpointEveryEntries: 1000 });
  const qstore = quiet.store as PostgresEventStore;
  const errors: unknown[] = [];
  qstore.onInlineError = (err) => errors.push(err);
  const org = 'org_final_fault';
  await quiet.run(orgDecider, orgStream(org), { type: 'create_org', orgId: org, name: 'Final', defaultProjectId: 'prj_final_default', owner: { userId: 'usr_final', email: 'f@example.com', displayName: null } }, quiet.ctx(org));
  await quiet.settle();
  // A fault at the server on the sealer's state row: writing it is refused while it is on
  // (the sealer retries it later; a projection's own failure would stop that projection, by design).
  const fault = await serverFault(quiet.db, 'audit_chain_state', 'INSERT OR UPDATE', 'chain state fault (test)');

  const r = await quiet.run(orgDecider, orgStream(org), { type: 'create_project', projectId: 'prj_final_1', name: 'One', slug: 'one', environment: 'test', settings: {} }, quiet.ctx(org));
  t.ok(r.changed && r.lastPosition, 'the append was accepted');
  t.ok(errors.some((e) => /chain state fault/.test(String((e as Error).message))), 'the cause reported is the refused statement, not only the rolled-back COMMIT');
  t.notOk(await quiet.readSide.waitFor(r.lastPosition!, 300), 'the read side cannot pass the unsealed event');

  await fault.off();
  t.ok(await quiet.readSide.waitFor(r.lastPosition!, 60_000), 'caught up once the fault is gone');
  t.match(await getProject(quiet.db, org, 'prj_final_1'), { id: 'prj_final_1', slug: 'one' });
  const created = (await quiet.store.readStream(orgStream(org))).filter((e) => e.type === 'project.created' && (e.data as { project_id: string }).project_id === 'prj_final_1');
  t.equal(created.length, 1, 'the event is in the log once');
  const report = await verifyOrgChain(quiet.store, org, quiet.key, quiet.origin);
  t.ok(report.ok, `the chain verifies: ${JSON.stringify(report).slice(0, 300)}`);
  // Inline again afterwards, and sealed once per event.
  const next = await quiet.run(orgDecider, orgStream(org), { type: 'create_project', projectId: 'prj_final_2', name: 'Two', slug: 'two', environment: 'test', settings: {} }, quiet.ctx(org));
  t.ok(await quiet.readSide.waitFor(next.lastPosition!, 60_000));
  const entries = await quiet.store.readStream(auditStream(org));
  const sources = entries.map((e) => (e.data as { source: { event_id: string } }).source.event_id);
  t.equal(new Set(sources).size, sources.length, 'no event sealed twice');
  t.ok((await verifyOrgChain(quiet.store, org, quiet.key, quiet.origin)).ok, 'and still verifies');
});
