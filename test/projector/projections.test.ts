import { randomUUID } from 'node:crypto';
import t from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { auditProjection } from '../../projections/audit.ts';
import { getProject, orgProjection } from '../../projections/org.ts';
import { usageProjection } from '../../projections/usage.ts';
import { mandateSlotProjection } from '../../projections/mandate-slot.ts';
import { Rejection } from '../../src/eventstore/handler.ts';
import type { RecordedEvent } from '../../src/eventstore/port.ts';
import type { Queryable } from '../../src/postgres/db.ts';
import { listCheckpoints, readCheckpoint } from '../../src/projector/checkpoints.ts';
import { liveTables, type Projection } from '../../src/projector/projection.ts';
import { applyBatch, ensureTables, ProjectionRunner, rebuildProjection } from '../../src/projector/runner.ts';
import { testLedger } from '../helpers/ledger.ts';
import { until } from '../helpers/wait.ts';

const ledger = await testLedger(t);

async function snapshot(db: Queryable, table: string) {
  const { rows } = await db.query(`SELECT * FROM ${table} ORDER BY 1`);
  return rows;
}

async function mixedCommands() {
  for (const org of ['org_a', 'org_b', 'org_c']) {
    const ctx = ledger.ctx(org);
    const s = orgStream(org);
    await ledger.run(orgDecider, s, { type: 'create_org', orgId: org, name: `Org ${org}`, defaultProjectId: `prj_${org}_default`, owner: { userId: `usr_${Math.random().toString(36).slice(2)}`, email: 'owner@example.com', displayName: null } }, ctx);
    for (let i = 0; i < 4; i++) {
      // Text with tabs, line breaks, backslashes, a literal \N, quotes and astral characters goes through every rebuild exactly.
      const name = i === 3 ? `P${i}\ttab\nline\r\\N back\\slash "q" é€😀` : `P${i}`;
      await ledger.run(orgDecider, s, { type: 'create_project', projectId: `prj_${org}_${i}`, name, slug: `p-${i}`, environment: i % 2 ? 'live' : 'test', settings: i === 3 ? { i, note: 'a\tb\\c\n\\N', nested: { q: '"' } } : { i } }, ctx);
    }
    await ledger.run(orgDecider, s, { type: 'update_project', projectId: `prj_${org}_1`, name: 'Renamed', slug: 'renamed', makeDefault: true }, ctx);
    await ledger.run(orgDecider, s, { type: 'delete_project', projectId: `prj_${org}_default` }, ctx);
    await ledger.run(orgDecider, s, { type: 'delete_project', projectId: `prj_${org}_2` }, ctx);
    await ledger.run(orgDecider, s, { type: 'create_project', projectId: `prj_${org}_x`, name: 'X', slug: 'p-2', environment: 'test', settings: {} }, ctx);
  }
  await ledger.settle();
}

await mixedCommands();

t.test('read-your-writes: after waitFor(lastPosition) the read model has the write', async (t) => {
  const ctx = ledger.ctx('org_a');
  const r = await ledger.run(orgDecider, orgStream('org_a'), { type: 'create_project', projectId: 'prj_ryw', name: 'RYW', slug: 'ryw', environment: 'test', settings: {} }, ctx);
  t.ok(r.changed && r.lastPosition);
  t.ok(await ledger.readSide.waitFor(r.lastPosition!, 60_000), 'caught up in time');
  t.match(await getProject(ledger.db, 'org_a', 'prj_ryw'), { id: 'prj_ryw', slug: 'ryw', is_default: false });
  t.equal(await getProject(ledger.db, 'org_b', 'prj_ryw'), undefined, 'another organization does not see it');
  t.notOk(await ledger.readSide.waitFor('99999999999999999999', 50), 'a position never reached times out');
});

t.test('the command handler re-decides on conflicts: concurrent creates all land', async (t) => {
  const ctx = ledger.ctx('org_b');
  const results = await Promise.all(
    Array.from({ length: 8 }, (_, i) => ledger.run(orgDecider, orgStream('org_b'), { type: 'create_project', projectId: `prj_conc_${i}`, name: `C${i}`, slug: `conc-${i}`, environment: 'test', settings: {} }, ctx)),
  );
  t.equal(results.filter((r) => r.changed).length, 8);
  // Same slug from two commands at once: exactly one wins, the other is re-decided into slug_conflict.
  const dup = await Promise.allSettled(
    [1, 2].map((i) => ledger.run(orgDecider, orgStream('org_b'), { type: 'create_project', projectId: `prj_dup_${i}`, name: 'D', slug: 'dup', environment: 'test', settings: {} }, ctx)),
  );
  t.equal(dup.filter((r) => r.status === 'fulfilled').length, 1);
  const lost = dup.find((r) => r.status === 'rejected') as PromiseRejectedResult;
  t.ok(lost.reason instanceof Rejection && lost.reason.code === 'slug_conflict');
  // With a conflict code, a lost race is answered instead of retried.
  const raced = await Promise.allSettled(
    [1, 2, 3].map((i) =>
      ledger.run(orgDecider, orgStream('org_b'), { type: 'create_project', projectId: `prj_tc_${i}`, name: 'T', slug: `tc-${i}`, environment: 'test', settings: {} }, ctx, { conflictCode: 'transition_conflict' }),
    ),
  );
  const codes = raced.filter((r) => r.status === 'rejected').map((r) => ((r as PromiseRejectedResult).reason as Rejection).code);
  t.ok(codes.every((c) => c === 'transition_conflict'));
  t.ok(raced.some((r) => r.status === 'fulfilled'));
  await ledger.settle();
});

t.test('applying every event twice changes nothing', async (t) => {
  await ledger.settle();
  const tables = Object.keys(orgProjection.tables);
  const live: Record<string, unknown[]> = {};
  for (const tb of tables) live[tb] = await snapshot(ledger.db, tb);
  const shadow = Object.fromEntries(tables.map((tb) => [tb, `${tb}__twice`]));
  await ensureTables(ledger.db, orgProjection, shadow);
  const events = await ledger.store.readAll({ maxCount: 10_000 });
  await ledger.db.transaction(async (tx) => {
    for (const e of events) {
      if (!orgProjection.eventTypes.has(e.type)) continue;
      await orgProjection.apply(tx, e, shadow);
      await orgProjection.apply(tx, e, shadow);
    }
  });
  for (const tb of tables) t.same(await snapshot(ledger.db, shadow[tb]!), live[tb], `${tb} identical`);
});

t.test('rebuild from position 0 produces identical tables and takes over', async (t) => {
  await ledger.settle();
  const tables = Object.keys(orgProjection.tables);
  const before: Record<string, unknown[]> = {};
  for (const tb of tables) before[tb] = await snapshot(ledger.db, tb);
  t.ok(before.users!.length >= 3 && before.projects!.length > 15);
  const r = await rebuildProjection(ledger.db, ledger.store, orgProjection);
  t.equal(r.position, await ledger.store.headPosition());
  for (const tb of tables) t.same(await snapshot(ledger.db, tb), before[tb], `${tb} row for row`);
  // The live runner resumes on the swapped tables.
  const ctx = ledger.ctx('org_c');
  const w = await ledger.run(orgDecider, orgStream('org_c'), { type: 'create_project', projectId: 'prj_after', name: 'After', slug: 'after', environment: 'test', settings: {} }, ctx);
  t.ok(await ledger.readSide.waitFor(w.lastPosition!, 60_000));
  t.ok(await getProject(ledger.db, 'org_c', 'prj_after'));
});

t.test('rebuild in small pages: identical tables; a duplicate creation falls back to the guarded path', async (t) => {
  // A creation of an id that exists (never decided, written straight to the log):
  // every path must leave the existing row as it is, as `apply` does. Its metadata is the
  // first's without the first's audit link (version 2): the writer links the copy itself.
  const first = (await ledger.store.readAll({ filter: { eventTypes: ['project.created'] }, maxCount: 1000 })).find((e) => (e.data as { project_id: string }).project_id === 'prj_org_a_3')!;
  const { audit_link: _itsLink, ...metadata } = first.metadata as typeof first.metadata & { audit_link?: string };
  await ledger.store.appendToStream(first.streamName, [{ type: 'project.created', data: { ...first.data, name: 'Duplicate', slug: 'duplicate' }, metadata: { ...metadata, request_id: null } }], { expectedRevision: 'any' });
  // Interleave organizations so that pages and lanes cut across them.
  for (let i = 0; i < 6; i++) {
    for (const org of ['org_a', 'org_b', 'org_c']) {
      await ledger.run(orgDecider, orgStream(org), { type: 'create_project', projectId: `prj_lane_${org}_${i}`, name: `L${i}`, slug: `lane-${i}`, environment: 'test', settings: { i } }, ledger.ctx(org));
    }
    if (i % 2 === 1) await ledger.run(orgDecider, orgStream('org_b'), { type: 'update_project', projectId: `prj_lane_org_b_${i - 1}`, name: 'Moved', makeDefault: true }, ledger.ctx('org_b'));
  }
  await ledger.settle();
  const tables = Object.keys(orgProjection.tables);
  const before: Record<string, unknown[]> = {};
  for (const tb of tables) before[tb] = await snapshot(ledger.db, tb);
  t.match(await getProject(ledger.db, first.metadata.org_id, (first.data as { project_id: string }).project_id), { name: (first.data as { name: string }).name }, 'the live projection ignored the duplicate');
  const pages: number[] = [];
  const r = await rebuildProjection(ledger.db, ledger.store, orgProjection, (p) => pages.push(p.processed), { pageSize: 7 });
  t.ok(pages.length > 10, `many pages (${pages.length})`);
  // The duplicate fails its page where pages go back to back (the fresh form inserts it): the bulk phase started over, one page after another.
  t.ok(pages.some((n, i) => i > 0 && n < pages[i - 1]!), 'started over after the failed page');
  t.equal(r.position, await ledger.store.headPosition());
  for (const tb of tables) t.same(await snapshot(ledger.db, tb), before[tb], `${tb} row for row`);
  // The set-based form, not fresh, in two batches, the second starting at the duplicate: the same rows again.
  const shadow = Object.fromEntries(tables.map((tb) => [tb, `${tb}__twobatches`]));
  await ensureTables(ledger.db, orgProjection, shadow);
  const events = await ledger.store.readAll({ maxCount: 10_000 });
  const cut = events.findIndex((e) => e.type === 'project.created' && (e.data as { name: string }).name === 'Duplicate');
  t.ok(cut > 0);
  for (const batch of [events.slice(0, cut), events.slice(cut)]) await ledger.db.transaction((tx) => applyBatch(tx, orgProjection, batch, shadow));
  for (const tb of tables) t.same(await snapshot(ledger.db, shadow[tb]!), before[tb], `${tb}: two batches, row for row`);
});

t.test('a rebuild whose apply fails rejects with the failure and leaves the live tables as they were', async (t) => {
  const failing: Projection = {
    name: 'rebuild_fail',
    version: 1,
    tables: { rebuild_fail_rows: (tb) => `CREATE TABLE ${tb} (position text COLLATE "C" PRIMARY KEY)` },
    eventTypes: new Set(['project.created']),
    async apply(tx, e, tb) {
      if ((e.data as { project_id: string }).project_id === 'prj_lane_org_b_3') throw new Error('apply boom');
      await tx.query(`INSERT INTO ${tb.rebuild_fail_rows} VALUES ($1) ON CONFLICT DO NOTHING`, [e.position]);
    },
  };
  await ensureTables(ledger.db, failing, { rebuild_fail_rows: 'rebuild_fail_rows' });
  await ledger.db.query(`INSERT INTO rebuild_fail_rows VALUES ('live')`);
  await t.rejects(rebuildProjection(ledger.db, ledger.store, failing, undefined, { pageSize: 5 }), /apply boom/);
  t.same(await snapshot(ledger.db, 'rebuild_fail_rows'), [{ position: 'live' }], 'the live table untouched');
});

t.test('a failing projection stops at the failing event, records it, and never skips', async (t) => {
  let failOn: string | undefined = 'project.updated';
  const applied: string[] = [];
  const flaky: Projection = {
    name: 'flaky',
    version: 1,
    tables: { flaky_rows: (tb) => `CREATE TABLE ${tb} (position text COLLATE "C" PRIMARY KEY)` },
    eventTypes: new Set(['project.created', 'project.updated']),
    async apply(tx, e, tb) {
      if (e.type === failOn) throw new Error('boom on purpose');
      applied.push(e.position);
      await tx.query(`INSERT INTO ${tb.flaky_rows} VALUES ($1) ON CONFLICT DO NOTHING`, [e.position]);
    },
  };
  const runner = new ProjectionRunner(ledger.db, ledger.store, flaky);
  await runner.start();
  await until(() => runner.state.status === 'failed', 'the projection to fail');
  t.equal(runner.state.status, 'failed');
  const cp = (await readCheckpoint(ledger.db, 'flaky'))!;
  t.equal(cp.status, 'failed', JSON.stringify(cp));
  t.match(cp.error, /boom on purpose/);
  const firstUpdate = (await ledger.store.readAll({ filter: { eventTypes: ['project.updated'] }, maxCount: 1 }))[0]!;
  t.equal(cp.error_position, firstUpdate.position, 'the failing position is recorded');
  t.ok(cp.position < firstUpdate.position, 'the checkpoint stays before the failing event');
  const { rows } = await ledger.db.query<{ n: string }>('SELECT count(*)::text AS n FROM flaky_rows WHERE position > $1', [cp.position]);
  t.equal(rows[0]!.n, '0', 'nothing past the checkpoint was kept');
  t.ok((await listCheckpoints(ledger.db)).some((c) => c.name === 'flaky' && c.status === 'failed'), 'shows in the status view');
  await runner.stop();
  // Fixed and restarted: it resumes from the failing event and catches up.
  failOn = undefined;
  const again = new ProjectionRunner(ledger.db, ledger.store, flaky);
  await again.start();
  const head = await ledger.store.headPosition();
  await until(() => again.state.position >= head, 'the fixed projection to catch up');
  t.equal((await readCheckpoint(ledger.db, 'flaky'))!.status, 'running');
  t.ok(applied.includes(firstUpdate.position), 'the failed event was applied after the fix');
  await again.stop();
});

t.test('an entry naming a source that is not an event id (a forged one) is projected all the same, its source id left empty', async (t) => {
  const entry = (org: string, eventId: string): RecordedEvent => ({
    id: randomUUID(),
    type: 'audit.entry_sealed',
    streamName: `audit-${org}`,
    revision: 0n,
    position: '00000000000999999999',
    data: { sequence_number: 1, event_type: 'project.created', happened_at: '2026-11-29T10:00:00.000Z', payload: { a: 1 }, payload_salt: null, source: { event_id: eventId, stream: 'org-x', revision: '0', position: '1' }, envelope: '{}', prev_hash: '0'.repeat(64), entry_hash: 'f'.repeat(64) },
    metadata: { org_id: org },
    recordedAt: '2026-11-29T10:00:00.000Z',
  });
  const real = randomUUID();
  const tables = liveTables(auditProjection);
  await auditProjection.apply(ledger.db, entry('org_forged_one', 'not-an-event-id'), tables);
  await auditProjection.applyBatch!(ledger.db, [entry('org_forged_batch', 'also not one'), entry('org_real_batch', real)], tables);
  const { rows } = await ledger.db.query<{ org_id: string; source: string | null }>(`SELECT org_id, source_event_id::text AS source FROM audit_events WHERE org_id IN ('org_forged_one', 'org_forged_batch', 'org_real_batch') ORDER BY org_id`);
  t.same(rows, [{ org_id: 'org_forged_batch', source: null }, { org_id: 'org_forged_one', source: null }, { org_id: 'org_real_batch', source: real }]);
});

t.test('usage rows: a batch of approved spends in one statement gives the rows one by one gives; a replay changes nothing', async (t) => {
  const spend = (i: number, actor: { kind: string; id: string } | undefined): RecordedEvent => ({
    id: randomUUID(),
    type: 'mandate.spend_approved',
    streamName: `mandate-mdt_usage_${i % 2}`,
    revision: BigInt(i),
    position: String(900000000 + i).padStart(20, '0'),
    data: { mandate_id: `mdt_usage_${i % 2}`, transaction_id: `txn_usage_${i}`, channel: 'api', amount_minor: String(100 + i), currency: i % 3 ? 'USD' : 'BRL', merchant: 'Shop "q" \\ é', description: null, spent_minor: String(1000 + i), remaining_minor: '5', at: `2026-11-29T1${i}:00:00.000Z` },
    metadata: { org_id: 'org_usage', project_id: i === 2 ? null : 'prj_usage', ...(actor ? { actor } : {}) } as RecordedEvent['metadata'],
    recordedAt: '2026-11-29T10:00:00.000Z',
  });
  const events = [spend(0, { kind: 'api_key', id: 'key_1' }), spend(1, { kind: 'user', id: 'usr_1' }), spend(2, undefined), spend(3, { kind: 'api_key', id: 'key_"2"' })];
  const one = { usage_spends: 'usage_spends__one' };
  const batch = { usage_spends: 'usage_spends__batch' };
  await ensureTables(ledger.db, usageProjection, one);
  await ensureTables(ledger.db, usageProjection, batch);
  for (const e of events) await usageProjection.apply(ledger.db, e, one);
  t.ok(usageProjection.pipelined?.(events), 'the batch form issues its statement without waiting for an answer');
  await ledger.db.transaction((tx) => usageProjection.applyBatch!(tx, events, batch));
  const rows = await snapshot(ledger.db, batch.usage_spends);
  t.equal(rows.length, 4);
  t.same(rows, await snapshot(ledger.db, one.usage_spends), 'the same rows, column for column');
  t.match(rows[2], { transaction_id: 'txn_usage_2', project_id: '', actor_kind: 'system', actor_id: '' });
  await ledger.db.transaction((tx) => usageProjection.applyBatch!(tx, [...events, events[1]!], batch));
  t.same(await snapshot(ledger.db, batch.usage_spends), rows, 'applied again (and twice in one batch): unchanged');
});

t.test('mandate slots: a run of approved spends in one statement leaves what one by one leaves (the latest per slot, never an older one)', async (t) => {
  let n = 0;
  const ev = (type: string, data: Record<string, unknown>): RecordedEvent => {
    n++;
    return { id: randomUUID(), type, streamName: `mandate-${String(data.mandate_id)}`, revision: BigInt(n), position: String(800000000 + n).padStart(20, '0'), data: data as RecordedEvent['data'], metadata: { org_id: 'org_slots' } as RecordedEvent['metadata'], recordedAt: '2026-11-29T10:00:00.000Z' };
  };
  const created = (id: string) =>
    ev('mandate.created', {
      mandate_id: id, org_id: 'org_slots', project_id: 'prj_slots', consumer_id: 'con_slots', agent_id: 'agt_slots', agent_did: 'did:key:z6Mk', purpose: 'p', display_name: null, intent_note: null,
      merchant_allowlist: ['shop'], merchant_pin_kind: 'merchant-id', cap_minor: '100000', per_tx_cap_minor: '50000', currency: 'USD', expires_at: '2027-01-01T00:00:00.000Z', created_at: '2026-11-29T10:00:00.000Z',
      slots: [{ currency: 'USD', rail: null, cap_minor: '100000', per_tx_cap_minor: '50000', funding_source_id: null }, { currency: 'BRL', rail: 'pix', cap_minor: '90000', per_tx_cap_minor: '9000', funding_source_id: null }],
    });
  const spent = (id: string, currency: string, total: string) =>
    ev('mandate.spend_approved', { mandate_id: id, transaction_id: `txn_${n}`, channel: 'api', amount_minor: '1', currency, merchant: 'shop', description: null, spent_minor: total, remaining_minor: '0', at: '2026-11-29T10:00:00.000Z' });
  const setup = [created('mdt_s1'), created('mdt_s2')];
  const late = spent('mdt_s2', 'BRL', '999');
  const run = [spent('mdt_s1', 'USD', '10'), spent('mdt_s1', 'BRL', '5'), spent('mdt_s1', 'USD', '30'), spent('mdt_s2', 'USD', '7'), spent('mdt_s1', 'USD', '45')];
  const newer = spent('mdt_s2', 'BRL', '20');
  const one = { mandate_slots: 'mandate_slots__one', mandate_transfers: 'mandate_transfers__one' };
  const batch = { mandate_slots: 'mandate_slots__batch', mandate_transfers: 'mandate_transfers__batch' };
  for (const tables of [one, batch]) await ensureTables(ledger.db, mandateSlotProjection, tables);
  // The BRL slot of mdt_s2 already stands past `late` (applied after it), which the run then carries: it must not go back.
  for (const e of [...setup, newer, late, ...run]) await mandateSlotProjection.apply(ledger.db, e, one);
  await ledger.db.transaction((tx) => mandateSlotProjection.applyBatch!(tx, setup, batch));
  await mandateSlotProjection.apply(ledger.db, newer, batch);
  await ledger.db.transaction((tx) => mandateSlotProjection.applyBatch!(tx, [late, ...run], batch));
  const rows = await ledger.db.query<{ mandate_id: string; currency: string; spent_minor: string }>(`SELECT mandate_id, currency, spent_minor::text FROM ${batch.mandate_slots} ORDER BY 1, 2`);
  t.same(rows.rows, [
    { mandate_id: 'mdt_s1', currency: 'BRL', spent_minor: '5' },
    { mandate_id: 'mdt_s1', currency: 'USD', spent_minor: '45' },
    { mandate_id: 'mdt_s2', currency: 'BRL', spent_minor: '20' },
    { mandate_id: 'mdt_s2', currency: 'USD', spent_minor: '7' },
  ]);
  const all = async (table: string) => (await ledger.db.query(`SELECT * FROM ${table} ORDER BY mandate_id, currency`)).rows;
  t.same(await all(batch.mandate_slots), await all(one.mandate_slots), 'the same rows as one by one, position included');
});
