import t from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { type AuditEntry, auditStream, checkpointStream } from '../../src/audit/chain.ts';
import { checkpointsBetween } from '../../src/audit/verifier.ts';
import { auditConfigStream } from '../../commands/audit.ts';
import { verifyRange } from '../../src/audit/windows.ts';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { testDatabase } from '../helpers/db.ts';
import { testLedger } from '../helpers/ledger.ts';
import { until } from '../helpers/wait.ts';
import { chainSize, storedEntryEvent } from '../helpers/audit-entries.ts';

// The verification worker is windowed and incremental: a pass verifies what is
// past its watermark and whichever window is due, so its cost does not grow
// with history; a tamper in the warm or cold window is found within that
// window's staleness (default thresholds: hot 7 d every hour, warm 30 d every
// day, older every week), never later.

// On both formats of the chain (docs/audit-chain.md): in version 2 the switch is entry 4 (after the
// organization's first batch, sealed in v1), so every later entry's sequence number is one more (S).
for (const format of [1, 2] as const) {
  t.test(`format ${format} of the chain`, async (t) => {
    let nowMs = Date.parse('2026-11-21T12:00:00.000Z');
    const ledger = await testLedger(t, { now: () => new Date(nowMs), checkpointEveryEntries: 4, auditFormat: format });
    const DAY = 86_400_000;
    const S = format === 2 ? 1 : 0;

    /** An organization whose chain has entries 40, 10 and 1 days old (cold, warm, hot). */
    async function chain(org: string): Promise<void> {
      const when = (msAgo: number) => {
        let tick = nowMs - msAgo;
        return { now: () => new Date((tick += 1000)) };
      };
      await ledger.run(orgDecider, orgStream(org), { type: 'create_org', orgId: org, name: org, defaultProjectId: `prj_${org}`, owner: { userId: `usr_${org}`, email: 'o@example.com', displayName: null } }, ledger.ctx(org, when(40 * DAY)));
      let i = 0;
      for (const [age, n] of [[40 * DAY - 100_000, 4], [10 * DAY, 4], [1 * DAY, 4]] as const) {
        for (let k = 0; k < n; k++, i++) {
          await ledger.run(orgDecider, orgStream(org), { type: 'create_project', projectId: `prj_${org}_${i}`, name: `P${i}`, slug: `p-${i}`, environment: 'test', settings: {} }, ledger.ctx(org, when(age - k * 1000)));
        }
      }
      await ledger.settle();
      await ledger.readSide.sealer.checkpointAll(true);
      await ledger.settle();
    }
    async function tamper(org: string, seq: number): Promise<void> {
      const e = await storedEntryEvent(ledger.db, ledger.store, org, seq);
      await ledger.db.query('UPDATE es_events SET data = $2::json WHERE position = $1', [e.position, JSON.stringify(e.forged)]);
    }
    const health = async (org: string) => (await ledger.db.query<{ ok: boolean; watermark: number; tip: number; first_problem: { sequence_number: number } | null }>('SELECT ok, watermark_sequence::int AS watermark, tip_sequence::int AS tip, first_problem FROM audit_verification WHERE org_id = $1', [org])).rows[0]!;
    const size = (ranges: [number, number][]) => ranges.reduce((n, [a, b]) => n + b - a + 1, 0);

    await chain('org_cold');
    await chain('org_warm');
    const v = ledger.readSide.verifier;

    t.test('the first pass walks to the tip; the next one verifies nothing new', async (t) => {
      const first = await v.passOrg('org_cold');
      t.same(first.problems, []);
      // Reaching the tip clean records the initial walk (entry 16, sealed inline), which the pass then covers too.
      t.same(first.verified, [[1, 15 + S], [16 + S, 16 + S]], 'from the start to the writer tip, then the record of the first walk');
      const walked = await ledger.store.readStream(auditConfigStream('org_cold'));
      t.match(walked.filter((e) => e.type === 'audit.initial_walk_completed').map((e) => e.data), [{ tip_sequence: 15 + S, at: new Date(nowMs).toISOString() }], 'recorded once, at the tip the walk reached');
      await v.passOrg('org_warm');
      const h = await health('org_cold');
      t.same([h.ok, h.watermark, h.tip], [true, 16 + S, 16 + S]);
      t.same((await v.passOrg('org_cold')).verified, [], 'nothing due: a pass costs nothing');
    });

    t.test('tampers in the cold and warm windows are found within their staleness', async (t) => {
      await tamper('org_cold', 5 + S); // 40 days old
      await tamper('org_warm', 9 + S); // 10 days old
      nowMs += 3_600_000; // +1 h: the hot window is due
      const hot = await v.passOrg('org_cold');
      t.ok(size(hot.verified) <= 5, `only the hot window, the record of the first walk included (${JSON.stringify(hot.verified)})`);
      t.same(hot.problems, [], 'the cold tamper is not in it');
      t.same((await v.passOrg('org_warm')).problems, [], 'the warm tamper is not in it either');

      nowMs += DAY; // the warm window is due
      const warm = await v.passOrg('org_warm');
      t.match(warm.problems[0], { kind: 'hash_mismatch', sequence_number: 9 + S }, 'warm tamper found within a day');
      t.match(await health('org_warm'), { ok: false, first_problem: { sequence_number: 9 + S } });
      t.same((await v.passOrg('org_cold')).problems, [], 'still nothing in the cold org');
      t.equal((await health('org_cold')).ok, true);

      nowMs += 6 * DAY; // seven days since the first walk: the cold cycle starts
      const cold = await v.passOrg('org_cold');
      t.match(cold.problems[0], { kind: 'hash_mismatch', sequence_number: 5 + S }, 'cold tamper found within a week');
      t.match(await health('org_cold'), { ok: false, first_problem: { sequence_number: 5 + S } });

      // A later pass that does not cover the break keeps health broken.
      nowMs += 3_600_000;
      await v.passOrg('org_cold');
      t.equal((await health('org_cold')).ok, false, 'health stays broken until the break is re-verified clean');
    });

    // A v1 entry copies its source event; a v2 entry is its event (no source to edit apart from it).
    if (format === 1) t.test('a range pass finds a source edited after sealing, whether its sources were fetched in one pass or one by one', async (t) => {
      // Two organizations writing in turn: each one's sources are spread over a shared log.
      for (const org of ['org_src_a', 'org_src_b']) {
        await ledger.run(orgDecider, orgStream(org), { type: 'create_org', orgId: org, name: org, defaultProjectId: `prj_${org}`, owner: { userId: `usr_${org}`, email: 'o@example.com', displayName: null } }, ledger.ctx(org));
      }
      for (let i = 0; i < 6; i++) {
        for (const org of ['org_src_a', 'org_src_b']) {
          await ledger.run(orgDecider, orgStream(org), { type: 'create_project', projectId: `prj_${org}_${i}`, name: `P${i}`, slug: `p-${i}`, environment: 'test', settings: {} }, ledger.ctx(org));
        }
      }
      await ledger.settle();
      const tip = (await ledger.store.readStream(auditStream('org_src_a'))).length;
      const key = { name: ledger.key.name, publicKey: ledger.key.publicKey };
      for (const budget of [undefined, 0]) {
        const clean = await verifyRange(ledger.store, ledger.db, 'org_src_a', 1, tip, key, ledger.origin, { prefetchBudget: budget });
        t.same(clean.problems, [], `untouched: no problem (prefetch budget ${budget ?? 'default'})`);
      }
      const { rows } = await ledger.db.query<{ data: AuditEntry }>('SELECT data FROM es_events WHERE stream_name = $1 AND stream_revision = $2', [auditStream('org_src_a'), 7]);
      await ledger.db.query(`UPDATE es_events SET data = json_build_object('project_id', 'prj_x', 'name', 'edited', 'slug', 'edited', 'environment', 'test', 'is_default', false, 'settings', '{}'::json, 'created_at', '2026-01-01T00:00:00.000Z') WHERE event_id = $1`, [rows[0]!.data.source.event_id]);
      for (const budget of [undefined, 0]) {
        const r = await verifyRange(ledger.store, ledger.db, 'org_src_a', 1, tip, key, ledger.origin, { prefetchBudget: budget });
        t.match(r.problems[0], { kind: 'source_mismatch', sequence_number: 8 }, `the edited source is found at its entry (prefetch budget ${budget ?? 'default'})`);
      }
    });

    // Checkpoints on a log of their own: the format plays no part.
    if (format === 1) t.test('a stretch reads the checkpoints signed in it, however many came before or after', async (t) => {
      // 600 checkpoints (over two pages of the backwards read), two of them
      // appended out of order as two signers racing would, and one whose size is
      // not a number (a forgery every stretch must look at).
      const org = 'org_many_checkpoints';
      const sizes = Array.from({ length: 600 }, (_, i) => i + 1);
      [sizes[299], sizes[300]] = [sizes[300]!, sizes[299]!];
      const meta = { org_id: org, actor: { kind: 'system', id: 'test' }, occurred_at: '2026-11-21T12:00:00.000Z', schema_version: 1 };
      const data = (size: unknown) => ({ org_id: org, size, root_hash: '00', note: 'n', key_name: 'k', verifier_key: 'v', signed_at: '2026-11-21T12:00:00.000Z' });
      const events = [...sizes.map((s) => data(s)), data('forged')].map((d) => ({ type: 'audit.checkpoint_signed', data: d as never, metadata: meta as never }));
      // A log of its own, with no read side: the made-up checkpoints would stop the ledger's projections,
      // and its sealer would then wait for them after every seal of the tests that follow.
      const { db } = await testDatabase(t, { schema: true });
      const store = await PostgresEventStore.open(db);
      t.teardown(() => store.close());
      await store.appendToStream(checkpointStream(org), events, { expectedRevision: 'no_stream' });
      const between = async (from: number, to: number) => (await checkpointsBetween(store, org, from, to)).map((c): unknown => c.size);
      const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i);
      t.same((await between(590, 700)).sort(), [...range(590, 600), 'forged' as unknown].sort(), 'at the tip');
      const middle = await between(250, 320);
      t.same(middle.filter((s) => typeof s === 'number').sort((a, b) => (a as number) - (b as number)), range(250, 320), 'a stretch across the swapped pair');
      t.ok(middle.includes('forged'));
      t.same((await between(1, 10)).filter((s) => typeof s === 'number'), range(1, 10), 'the oldest, read back across every page after them');
      t.same(await between(700, 800), ['forged'], 'past the last');
    });

    t.test('a stored tree node rewritten inside a stretch: found at the node, on every level', async (t) => {
      const org = 'org_nodes';
      await ledger.run(orgDecider, orgStream(org), { type: 'create_org', orgId: org, name: org, defaultProjectId: `prj_${org}`, owner: { userId: `usr_${org}`, email: 'o@example.com', displayName: null } }, ledger.ctx(org));
      for (let i = 0; i < 12; i++) {
        await ledger.run(orgDecider, orgStream(org), { type: 'create_project', projectId: `prj_${org}_${i}`, name: `P${i}`, slug: `p-${i}`, environment: 'test', settings: {} }, ledger.ctx(org));
      }
      // Sealed.
      const tip = await until(async () => {
        const n = await chainSize(ledger.store, org);
        return n >= 13 + S ? n : undefined;
      }, 'the 13 events sealed');
      const key = { name: ledger.key.name, publicKey: ledger.key.publicKey };
      t.same((await verifyRange(ledger.store, ledger.db, org, 1, tip, key, ledger.origin)).problems, [], 'untouched: no problem');
      // Stretch 3..10 holds leaves 2..9, level-1 nodes 1..4, level-2 node 1 (leaves 4..7).
      for (const [level, idx] of [[0, 5], [1, 2], [2, 1]] as const) {
        const { rows } = await ledger.db.query<{ hash: Buffer }>('SELECT hash FROM audit_tree_nodes WHERE org_id = $1 AND level = $2 AND idx = $3', [org, level, idx]);
        const original = rows[0]!.hash;
        await ledger.db.query('UPDATE audit_tree_nodes SET hash = $4 WHERE org_id = $1 AND level = $2 AND idx = $3', [org, level, idx, Buffer.alloc(32, 7)]);
        const r = await verifyRange(ledger.store, ledger.db, org, 3, 10, key, ledger.origin);
        t.ok(
          r.problems.some((p) => p.kind === 'root_mismatch' && p.sequence_number === idx * 2 ** level + 1 && p.detail.includes(`node ${level}/${idx}`)),
          `node ${level}/${idx}: ${JSON.stringify(r.problems).slice(0, 200)}`,
        );
        await ledger.db.query('UPDATE audit_tree_nodes SET hash = $4 WHERE org_id = $1 AND level = $2 AND idx = $3', [org, level, idx, original]);
      }
      // A node only partly inside the stretch is not the stretch's to judge.
      const { rows } = await ledger.db.query<{ hash: Buffer }>('SELECT hash FROM audit_tree_nodes WHERE org_id = $1 AND level = 3 AND idx = 0', [org]);
      if (rows[0]) {
        await ledger.db.query('UPDATE audit_tree_nodes SET hash = $2 WHERE org_id = $1 AND level = 3 AND idx = 0', [org, Buffer.alloc(32, 9)]);
        t.notOk((await verifyRange(ledger.store, ledger.db, org, 3, 10, key, ledger.origin)).problems.some((p) => p.detail.includes('node 3/0')), 'a node covering entries outside the stretch is not compared');
        await ledger.db.query('UPDATE audit_tree_nodes SET hash = $2 WHERE org_id = $1 AND level = 3 AND idx = 0', [org, rows[0].hash]);
      }
    });
  });
}
