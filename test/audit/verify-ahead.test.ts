import t from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { switchStream } from '../../src/audit/link.ts';
import { chainItems, storedCheckpoints, verifyChain, verifyOrgChain, type VerifyReport } from '../../src/audit/verifier.ts';
import { testLedger } from '../helpers/ledger.ts';

// The walk of a switched chain's linked tail in stretches of the log, by this
// thread alone and with a helper thread (src/audit/verify-ahead.ts), reports
// exactly what the walk over each event reports (`chainItems`, as the export
// reads the chain): on an untouched chain and on each kind of tampering, with
// the organization's events interleaved with another's in the log, and when
// the helper cannot start.

const ORG = 'org_ahead';
const OTHER = 'org_ahead_other';
const meta = (org: string, n: number) => ({ org_id: org, actor: { kind: 'system', id: 'test' }, occurred_at: new Date(Date.UTC(2026, 10, 30, 1, 0, n % 60)).toISOString(), schema_version: 1 });

t.test('stretches prechecked here and on a helper thread settle into the same report as the walk over each event', async (t) => {
  const ledger = await testLedger(t, { checkpointEveryEntries: 16, auditFormat: 2 });
  for (const org of [ORG, OTHER]) {
    await ledger.run(orgDecider, orgStream(org), { type: 'create_org', orgId: org, name: org, defaultProjectId: `prj_${org}`, owner: { userId: `usr_${org}`, email: `${org}@example.com`, displayName: null } }, ledger.ctx(org));
  }
  await ledger.settle();
  for (let i = 0; i < 120; i += 10) {
    const writes = [];
    for (let k = i; k < i + 10; k++) {
      writes.push(ledger.store.appendToStream(`note-${ORG}-${k % 3}`, [{ type: 'project.updated', data: { project_id: `prj_none_${k}`, name: `name ${k}` }, metadata: meta(ORG, k) }]));
      if (k % 3 === 0) writes.push(ledger.store.appendToStream(`note-${OTHER}`, [{ type: 'project.updated', data: { project_id: `prj_other_${k}`, name: `other ${k}` }, metadata: meta(OTHER, k) }]));
    }
    await Promise.all(writes);
  }
  await ledger.settle();
  await ledger.readSide.sealer.checkpointAll(true);

  const helper = { dbUrl: ledger.db.url };
  /** The walk over each event (no prechecking), then the stretched walks: alone, with a helper taking the odd stretches, greedy with a helper. */
  async function reports() {
    const reference = await verifyChain({ orgId: ORG, entries: chainItems(ledger.store, ORG), checkpoints: await storedCheckpoints(ledger.store, ORG), key: ledger.key, origin: `${ledger.origin}/${ORG}` });
    const alone = await verifyOrgChain(ledger.store, ORG, ledger.key, ledger.origin, undefined, { stretch: 7 });
    const stats = { here: 0, helper: 0 };
    const split = await verifyOrgChain(ledger.store, ORG, ledger.key, ledger.origin, undefined, { helper, stretch: 7, alternate: true, stats });
    const greedy = await verifyOrgChain(ledger.store, ORG, ledger.key, ledger.origin, undefined, { helper, stretch: 11 });
    return { reference, alone, split, greedy, stats };
  }
  const same = (r: Awaited<ReturnType<typeof reports>>, what: string) => {
    t.same(r.alone, r.reference, `${what}: stretched, this thread alone`);
    t.same(r.split, r.reference, `${what}: the helper's stretches and this thread's`);
    t.same(r.greedy, r.reference, `${what}: each thread taking the next free stretch`);
    t.ok(r.stats.helper > 0 && r.stats.here > 0, `${what}: both threads prechecked stretches (${r.stats.here} here, ${r.stats.helper} on the helper)`);
  };

  const clean = await reports();
  t.match(clean.reference, { ok: true }, JSON.stringify(clean.reference.problems));
  t.ok(clean.reference.entries > 120, `the chain holds the switch and every fact (${clean.reference.entries} entries)`);
  t.ok(clean.reference.checkpoints_checked >= 4, 'signed checkpoints along the tail are checked as the tree grows');
  same(clean, 'untouched');

  // Tampering in the log itself, each kind the walk reports, each settled the same way.
  const [sw] = await ledger.store.readStream(switchStream(ORG));
  const facts = await ledger.db.query<{ position: string }>(`SELECT position::text FROM es_events WHERE position > $1 AND metadata->>'org_id' = $2 AND stream_name LIKE 'note-%' ORDER BY position`, [
    sw!.position,
    ORG,
  ]);
  const at = (k: number) => facts.rows[k]!.position;
  const first = (r: VerifyReport) => r.first_problem;

  await ledger.db.query(`UPDATE es_events SET data = jsonb_set(data::jsonb, '{name}', '"forged"')::json WHERE position = $1`, [at(40)]);
  const changed = await reports();
  t.match(first(changed.reference), { kind: 'hash_mismatch' });
  same(changed, 'a changed payload');

  await ledger.db.query(`UPDATE es_events SET metadata = jsonb_set(metadata::jsonb, '{org_id}', '"${OTHER}"')::json WHERE position = $1`, [at(60)]);
  const moved = await reports();
  t.ok(moved.reference.problems.length >= 2, 'an event moved to another organization leaves a break in this chain');
  same(moved, 'an event moved out of the chain');

  await ledger.db.query(`UPDATE es_events SET metadata = (metadata::jsonb - 'audit_link')::json WHERE position = $1`, [at(80)]);
  const unlinked = await reports();
  t.ok(unlinked.reference.problems.some((p) => p.kind === 'malformed_entry'), 'a fact without its link is malformed');
  same(unlinked, 'a link removed');

  await ledger.db.query('DELETE FROM es_events WHERE position = $1', [at(100)]);
  const removed = await reports();
  t.ok(removed.reference.problems.some((p) => p.kind === 'sequence_gap'), 'a removed fact is a gap');
  same(removed, 'a removed fact');

  // A helper that cannot reach the database: this thread does its stretches, the report is the same.
  const stats = { here: 0, helper: 0 };
  const unreachable = await verifyOrgChain(ledger.store, ORG, ledger.key, ledger.origin, undefined, { helper: { dbUrl: 'postgres://nobody@127.0.0.1:1/none' }, stretch: 7, alternate: true, stats });
  t.same(unreachable, removed.reference, 'a helper that fails leaves its stretches to this thread');
  t.equal(stats.helper, 0, 'none came from it');
});
