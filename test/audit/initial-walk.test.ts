import t from 'tap';
import { auditConfigDecider, auditConfigStream } from '../../commands/audit.ts';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { VerifierThread } from '../../src/audit/verifier-thread.ts';
import { loadState } from '../../src/eventstore/handler.ts';
import { testLedger, type TestLedger } from '../helpers/ledger.ts';
import { until } from '../helpers/wait.ts';
import { chainSize, chainSizeWith, storedEntryEvent } from '../helpers/audit-entries.ts';

// Spec, Audit config: initial_walk_completed_at is null until a forward walk
// reaches the chain tip. The running service verifies on its own thread with
// the scheduled pass (not the whole walk of the CLI): that pass records the
// initial walk, once per organization, and never for a chain it found broken.
// On both formats of the chain (docs/audit-chain.md): a version 2 chain holds
// the switch as one more entry, so the tips are read, not assumed.

for (const format of [1, 2] as const) {
  const ledger = await testLedger(t, { auditFormat: format });

  async function seal(l: TestLedger, org: string, projects: number, from = 0): Promise<void> {
    const ctx = l.ctx(org);
    if (from === 0) {
      await l.run(orgDecider, orgStream(org), { type: 'create_org', orgId: org, name: `Org ${org}`, defaultProjectId: `prj_${org}`, owner: { userId: `usr_${org}`, email: 'owner@example.com', displayName: null } }, ctx);
    }
    for (let i = from; i < from + projects; i++) {
      await l.run(orgDecider, orgStream(org), { type: 'create_project', projectId: `prj_${org}_${i}`, name: `Project ${i}`, slug: `p-${i}`, environment: 'test', settings: {} }, ctx);
    }
    await l.settle();
  }

  type Row = { watermark: number; tip: number; ok: boolean; checked: string | null };
  const verification = async (org: string): Promise<Row | undefined> =>
    (await ledger.db.query<Row>('SELECT watermark_sequence::int AS watermark, tip_sequence::int AS tip, ok, last_checked_at::text AS checked FROM audit_verification WHERE org_id = $1', [org])).rows[0];
  const chainTip = (org: string) => chainSize(ledger.store, org);
  /** The chain's size once the walk's record is one of its entries (with a switch before it, when it was the batch that switched). */
  const sealedWithRecord = (org: string) => chainSizeWith(ledger.store, org, 'audit.initial_walk_completed');
  const initialWalkAt = async (org: string) => (await loadState(ledger.store, auditConfigStream(org), auditConfigDecider)).state.initialWalkAt;
  const walkRecords = async (org: string) => (await ledger.store.readStream(auditConfigStream(org))).filter((e) => e.type === 'audit.initial_walk_completed');
  const projected = async (org: string) => (await ledger.db.query<{ at: string | null }>('SELECT initial_walk_completed_at::text AS at FROM audit_configs WHERE org_id = $1', [org])).rows[0]?.at ?? null;
  /** Resolves once a pass of the thread that started after `checked` has finished (each pass stamps last_checked_at with its start). */
  const nextPass = (org: string, checked: string | null) => until(async () => { const v = await verification(org); return v && v.checked !== checked ? v : undefined; }, `a pass over ${org} after ${checked}`);

  t.test(`the verifier thread records the initial walk once when it reaches the tip, and not for a broken chain (format ${format})`, async (t) => {
    await seal(ledger, 'org_walk_clean', 4); // entries 1..7 (8 with a switch)
    await seal(ledger, 'org_walk_broken', 4);
    const tip = await chainTip('org_walk_clean');
    // Entry 3 of the second organization edited behind the service's back, before any walk.
    const edited = await storedEntryEvent(ledger.db, ledger.store, 'org_walk_broken', 3);
    await ledger.db.query('UPDATE es_events SET data = $2::json WHERE position = $1', [edited.position, JSON.stringify(edited.forged)]);
    t.equal(await initialWalkAt('org_walk_clean'), null, 'no walk yet');

    const spec = { dbUrl: ledger.url, esdbUrl: undefined, keyName: ledger.key.name, publicKey: ledger.key.publicKey, origin: ledger.origin };
    let thread = await VerifierThread.start(spec);
    t.teardown(() => thread.stop());

    // The thread's pass reaches the tip clean and records it; the service seals the record (the next entry), and a later pass covers it.
    await until(() => initialWalkAt('org_walk_clean'), 'the thread to record the initial walk');
    t.match((await walkRecords('org_walk_clean')).map((r) => r.data), [{ org_id: 'org_walk_clean', tip_sequence: tip }], 'one record, at the tip the walk reached');
    const sealed = await until(() => sealedWithRecord('org_walk_clean'), 'the record to be sealed');
    await until(async () => (await verification('org_walk_clean'))?.watermark === sealed || undefined, 'the thread to verify the sealed record');
    await until(() => projected('org_walk_clean'), 'GET /v1/audit-events/config to show initial_walk_completed_at');

    // The broken chain: found, and a whole later pass still records nothing.
    const broken = await until(async () => { const v = await verification('org_walk_broken'); return v && !v.ok ? v : undefined; }, 'the thread to find the edited entry');
    await nextPass('org_walk_broken', broken.checked);
    t.equal(await initialWalkAt('org_walk_broken'), null, 'a broken chain has no initial walk');
    t.same(await walkRecords('org_walk_broken'), [], 'nothing appended for it');

    // New entries, walked to the tip again by a new thread: still exactly one record.
    await thread.stop();
    await seal(ledger, 'org_walk_clean', 3, 4); // three entries more
    thread = await VerifierThread.start(spec);
    await until(async () => (await verification('org_walk_clean'))?.watermark === sealed + 3 || undefined, 'the new thread to reach the new tip');
    const at = (await verification('org_walk_clean'))!.checked;
    await nextPass('org_walk_clean', at);
    t.equal((await walkRecords('org_walk_clean')).length, 1, 'recorded exactly once');
    t.equal(await chainTip('org_walk_clean'), sealed + 3, 'nothing more sealed');
  });
}
