import t from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { type AuditEntry, auditStream, isAuditStream } from '../../src/audit/chain.ts';
import { Sealer } from '../../src/audit/sealer.ts';
import { verifyOrgChain } from '../../src/audit/verifier.ts';
import { testLedger } from '../helpers/ledger.ts';

// A backlog of one organization whose audit entries together pass the most one
// append may carry (1 MiB on either store): the sealer was down while 60
// projects with 24 KB of settings each were created (~1.5 MB of entries). On
// its return it seals them all, one entry per event in log order, as several
// appends, and the chain verifies. Before, the one append of every entry was
// refused and the sealer retried it forever.

for (const store of ['postgres', 'esdb'] as const) {
  t.test(`${store}: a backlog larger than one append is sealed in several`, async (t) => {
    const ledger = await testLedger(t, { store, checkpointEveryEntries: 16, auditFormat: 1 });
    const org = 'org_backlog';
    const ctx = ledger.ctx(org);
    await ledger.run(orgDecider, orgStream(org), { type: 'create_org', orgId: org, name: 'Backlog', defaultProjectId: 'prj_backlog', owner: { userId: 'usr_backlog', email: 'owner@example.com', displayName: null } }, ctx);
    await ledger.settle();
    await ledger.readSide.sealer.stop();
    const filler = 'x'.repeat(24_000);
    for (let i = 0; i < 60; i++) {
      await ledger.run(orgDecider, orgStream(org), { type: 'create_project', projectId: `prj_b_${i}`, name: `P${i}`, slug: `b-${i}`, environment: 'test', settings: { filler, i } }, ctx);
    }
    const sealer = new Sealer(ledger.db, ledger.store, { signingKey: ledger.key, origin: ledger.origin, checkpointEveryEntries: 16 }, ledger.readSide.progress);
    t.teardown(() => sealer.stop());
    await sealer.start();
    t.ok(await ledger.readSide.waitFor(await ledger.store.headPosition(), 60_000), 'the sealer caught up with the log');
    const business = (await ledger.store.readAll({ maxCount: 10_000 })).filter((e) => !isAuditStream(e.streamName) && e.metadata.org_id === org);
    const entries = await ledger.store.readStream(auditStream(org), { maxCount: 10_000 });
    t.equal(entries.length, business.length, 'one entry per event');
    t.same(
      entries.map((e) => (e.data as unknown as AuditEntry).source.event_id),
      business.map((e) => e.id),
      'in log order',
    );
    const bytes = entries.slice(1).reduce((n, e) => n + JSON.stringify(e.data).length, 0);
    t.ok(bytes > ledger.store.maxAppendBytes, `the backlog's entries (${bytes} bytes) pass one append's limit (${ledger.store.maxAppendBytes})`);
    const report = await verifyOrgChain(ledger.store, org, ledger.key, ledger.origin);
    t.ok(report.ok, 'the chain verifies');
    t.equal(report.entries, business.length);
  });
}

// One event whose own audit entry would pass the limit (its payload plus the
// entry's envelope): refused at the append, so no acknowledged event is left
// that the chain can never seal (the sealer would retry it forever, and every
// organization's sealing behind it would wait).
t.test('an event too large to seal is refused, and sealing goes on', async (t) => {
  const ledger = await testLedger(t, { auditFormat: 1 });
  const org = 'org_huge';
  const ctx = ledger.ctx(org);
  await ledger.run(orgDecider, orgStream(org), { type: 'create_org', orgId: org, name: 'Huge', defaultProjectId: 'prj_huge', owner: { userId: 'usr_huge', email: 'owner@example.com', displayName: null } }, ctx);
  const filler = 'x'.repeat(ledger.store.maxAppendBytes - 1_200);
  await t.rejects(ledger.run(orgDecider, orgStream(org), { type: 'create_project', projectId: 'prj_huge_1', name: 'P', slug: 'h-1', environment: 'test', settings: { filler } }, ctx), { code: 'invalid_event' });
  await ledger.run(orgDecider, orgStream(org), { type: 'create_project', projectId: 'prj_huge_2', name: 'P2', slug: 'h-2', environment: 'test', settings: {} }, ctx);
  t.ok(await ledger.readSide.waitFor(await ledger.store.headPosition(), 30_000), 'sealed up to the head');
  const report = await verifyOrgChain(ledger.store, org, ledger.key, ledger.origin);
  t.ok(report.ok, 'the chain verifies');
});
