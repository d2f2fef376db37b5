import t from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { VerifierThread } from '../../src/audit/verifier-thread.ts';
import { auditVerificationPasses } from '../../src/metrics.ts';
import type { Db } from '../../src/postgres/db.ts';
import { testLedger, type TestLedger } from '../helpers/ledger.ts';
import { until } from '../helpers/wait.ts';
import { chainSize, chainSizeWith, storedEntryEvent } from '../helpers/audit-entries.ts';

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

// On PostgreSQL in both formats of the chain (docs/audit-chain.md); on EventStoreDB chains stay version 1.
for (const [store, format] of [['postgres', 1], ['postgres', 2], ['esdb', 1]] as const) {
  t.test(`on ${store}, format ${format}: the thread verifies to the tip${store === 'postgres' ? ' and finds an edited entry' : ', a second thread from where the first stopped'}`, async (t) => {
    const ledger = await testLedger(t, { store, auditFormat: format });
    const org = 'org_thread';
    await seal(ledger, org, 5);
    const first = await chainSize(ledger.store, org);
    const esdbUrl = store === 'esdb' ? (ledger.store as unknown as { connectionString(): string }).connectionString() : undefined;
    const spec = { dbUrl: ledger.url, esdbUrl, keyName: ledger.key.name, publicKey: ledger.key.publicKey, origin: ledger.origin };
    const passes = async (result: 'ok' | 'broken') => (await auditVerificationPasses.get()).values.find((v) => v.labels.result === result)?.value ?? 0;
    const okBefore = await passes('ok');
    let thread = await VerifierThread.start(spec);
    t.teardown(() => thread.stop());

    // 8 entries (creating the organization seals three; a switch is one more) walked to the tip, clean;
    // reaching it records the initial walk, sealed as the next entry, which a later pass walks too.
    t.equal(first, format === 1 ? 8 : 9, format === 1 ? 'eight entries' : 'eight entries and the switch');
    const sealed = await until(() => chainSizeWith(ledger.store, org, 'audit.initial_walk_completed'), 'the record of the walk to be sealed');
    await until(async () => (await verification(ledger.db, org))?.watermark === sealed, 'the thread to verify the first entries and the record of its walk');
    t.match(await verification(ledger.db, org), { watermark: sealed, tip: sealed, ok: true, first_problem: null });
    t.ok((await passes('ok')) > okBefore, "the thread's clean passes are counted in this process's registry (what /metrics serves)");

    // Stopped, then four entries more are sealed and (on Postgres) the first one's payload edited; a new thread walks them.
    await thread.stop();
    await seal(ledger, org, 4, 5);
    if (store === 'postgres') {
      const edited = await storedEntryEvent(ledger.db, ledger.store, org, sealed + 1);
      await ledger.db.query('UPDATE es_events SET data = $2::json WHERE position = $1', [edited.position, JSON.stringify(edited.forged)]);
    }
    thread = await VerifierThread.start(spec);
    if (store === 'postgres') {
      await until(async () => (await verification(ledger.db, org))?.ok === false, 'the thread to find the edited entry');
      t.match((await verification(ledger.db, org))!.first_problem, { kind: 'hash_mismatch', sequence_number: sealed + 1 }, 'found at its sequence');
      await until(async () => (await passes('broken')) > 0, 'the broken pass to be counted here');
    } else {
      // The EventStoreDB log cannot be edited in place: the new entries verify clean.
      await until(async () => (await verification(ledger.db, org))?.watermark === sealed + 4, 'the thread to verify the four new entries');
      t.match(await verification(ledger.db, org), { watermark: sealed + 4, tip: sealed + 4, ok: true });
    }
  });
}

t.test('a thread that cannot open its store fails to start (the service then verifies in its own thread)', async (t) => {
  await t.rejects(VerifierThread.start({ dbUrl: 'postgres://ledger@127.0.0.1:1/none', esdbUrl: undefined, keyName: 'k', publicKey: new Uint8Array(32), origin: 'o' }));
});
