import t from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { type AuditEntry, auditStream } from '../../src/audit/chain.ts';
import { VerifierThread } from '../../src/audit/verifier-thread.ts';
import type { Db } from '../../src/postgres/db.ts';
import { testLedger, type TestLedger } from '../helpers/ledger.ts';
import { until } from '../helpers/wait.ts';

// The continuous verifier on its own thread (what `npm start` runs): with its
// own connections and its own view of the log, it walks every sealed entry to
// the chain's tip, and finds an entry edited behind the service's back.

type Verification = { watermark: number; tip: number; ok: boolean; first_problem: { kind: string; sequence_number: number } | null };

async function verification(db: Db, org: string): Promise<Verification | undefined> {
  const { rows } = await db.query<{ watermark: string; tip: string; ok: boolean; first_problem: Verification['first_problem'] }>(
    'SELECT watermark_sequence::text AS watermark, tip_sequence::text AS tip, ok, first_problem FROM audit_verification WHERE org_id = $1',
    [org],
  );
  const r = rows[0];
  return r && { watermark: Number(r.watermark), tip: Number(r.tip), ok: r.ok, first_problem: r.first_problem };
}

async function seal(ledger: TestLedger, org: string, projects: number, from = 0): Promise<void> {
  const ctx = ledger.ctx(org);
  if (from === 0) {
    await ledger.run(orgDecider, orgStream(org), { type: 'create_org', orgId: org, name: `Org ${org}`, defaultProjectId: `prj_${org}`, owner: { userId: `usr_${org}`, email: 'owner@example.com', displayName: null } }, ctx);
  }
  for (let i = from; i < from + projects; i++) {
    await ledger.run(orgDecider, orgStream(org), { type: 'create_project', projectId: `prj_${org}_${i}`, name: `Project ${i}`, slug: `p-${i}`, environment: 'test', settings: { i } }, ctx);
  }
  await ledger.settle();
}

for (const store of ['postgres', 'esdb'] as const) {
  t.test(`on ${store}: the thread verifies to the tip${store === 'postgres' ? ' and finds an edited entry' : ', a second thread from where the first stopped'}`, async (t) => {
    const ledger = await testLedger(t, { store, auditFormat: 1 });
    const org = 'org_thread';
    await seal(ledger, org, 5);
    const esdbUrl = store === 'esdb' ? (ledger.store as unknown as { connectionString(): string }).connectionString() : undefined;
    const spec = { dbUrl: ledger.url, esdbUrl, keyName: ledger.key.name, publicKey: ledger.key.publicKey, origin: ledger.origin };
    let thread = await VerifierThread.start(spec);
    t.teardown(() => thread.stop());

    // 8 entries (creating the organization seals three) walked to the tip, clean; reaching
    // it records the initial walk, sealed as entry 9, which a later pass walks too.
    await until(async () => (await verification(ledger.db, org))?.watermark === 9, 'the thread to verify the first 8 entries and the record of its walk');
    t.match(await verification(ledger.db, org), { watermark: 9, tip: 9, ok: true, first_problem: null });

    // Stopped, then entries 10..13 are sealed and (on Postgres) entry 10's payload edited; a new thread walks them.
    await thread.stop();
    await seal(ledger, org, 4, 5);
    if (store === 'postgres') {
      const { rows } = await ledger.db.query<{ data: AuditEntry }>('SELECT data FROM es_events WHERE stream_name = $1 AND stream_revision = 9', [auditStream(org)]);
      const e = rows[0]!.data;
      await ledger.db.query('UPDATE es_events SET data = $2::json WHERE stream_name = $1 AND stream_revision = 9', [auditStream(org), JSON.stringify({ ...e, payload: { ...e.payload, name: 'forged' } })]);
    }
    thread = await VerifierThread.start(spec);
    if (store === 'postgres') {
      await until(async () => (await verification(ledger.db, org))?.ok === false, 'the thread to find the edited entry');
      t.match((await verification(ledger.db, org))!.first_problem, { kind: 'hash_mismatch', sequence_number: 10 }, 'found at its sequence');
    } else {
      // The EventStoreDB log cannot be edited in place: the new entries verify clean.
      await until(async () => (await verification(ledger.db, org))?.watermark === 13, 'the thread to verify entries 10..13');
      t.match(await verification(ledger.db, org), { watermark: 13, tip: 13, ok: true });
    }
  });
}

t.test('a thread that cannot open its store fails to start (the service then verifies in its own thread)', async (t) => {
  await t.rejects(VerifierThread.start({ dbUrl: 'postgres://ledger@127.0.0.1:1/none', esdbUrl: undefined, keyName: 'k', publicKey: new Uint8Array(32), origin: 'o' }));
});
