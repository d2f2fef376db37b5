import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { auditStream } from '../../src/audit/chain.ts';
import { exportChain, verifyExport } from '../../src/audit/export.ts';
import { linkOf, switchStream } from '../../src/audit/link.ts';
import { verifierKey } from '../../src/audit/note.ts';
import { chainItems, verifyOrgChain } from '../../src/audit/verifier.ts';
import { verifyRange } from '../../src/audit/windows.ts';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { testLedger } from '../helpers/ledger.ts';
import { verifyBundleDir } from './independent-verifier.ts';

// The audit chain's write path, version 2 (issue 57): a sealer set to format 2
// switches a chain inline, after which every fact of the organization is
// written once, carrying its link, and the database refuses any link not on
// the chain's head (two writers can never both take a sequence number) and any
// unlinked fact of the switched organization (what code older than version 2
// would write).

const ORG = 'org_write_v2';
const meta = (n: number) => ({ org_id: ORG, actor: { kind: 'system', id: 'test' }, occurred_at: new Date(Date.UTC(2026, 10, 29, 9, 0, n)).toISOString(), schema_version: 1 });

t.test('a chain switches inline, then each fact carries its link; two writers on one database never fork it', async (t) => {
  const ledger = await testLedger(t, { checkpointEveryEntries: 4, auditFormat: 2 });
  const vkey = verifierKey(ledger.key.name, ledger.key.publicKey);
  const ctx = ledger.ctx(ORG);
  await ledger.run(orgDecider, orgStream(ORG), { type: 'create_org', orgId: ORG, name: 'Writes', defaultProjectId: `prj_${ORG}`, owner: { userId: 'usr_w', email: 'owner@example.com', displayName: null } }, ctx);
  await ledger.settle();

  const v1 = await ledger.store.readStream(auditStream(ORG));
  const [sw] = await ledger.store.readStream(switchStream(ORG));
  t.ok(sw, 'the chain switched');
  t.equal(linkOf(sw!)?.sequence_number, v1.length + 1, 'the switch is the entry right after the last v1 entry');
  t.same(sw!.data, { org_id: ORG, format: 2, from_sequence: v1.length + 1 });

  // A second writer on the same database, with its own (empty) view of the chain's head.
  const other = await PostgresEventStore.open(ledger.db, { listen: false });
  t.teardown(() => other.close());
  const writes = [];
  for (let i = 0; i < 40; i++) {
    const store = i % 2 === 0 ? ledger.store : other;
    // A registered fact (the read models take it; no project of that id, so nothing changes but the chain).
    writes.push(store.appendToStream(`note-${ORG}-${i % 5}`, [{ type: 'project.updated', data: { project_id: `prj_none_${i}`, name: `name ${i}` }, metadata: meta(i) }]));
  }
  await Promise.all(writes);
  await ledger.settle();
  t.equal((await ledger.store.readStream(auditStream(ORG))).length, v1.length, 'no v1 entry after the switch: each fact is its own entry');

  const items = [];
  for await (const item of chainItems(ledger.store, ORG)) items.push(item);
  const linked = items.flatMap((i) => ('linked' in i ? [i.linked] : []));
  t.equal(linked.length, 41, 'the switch and every fact, each once');
  t.same(
    linked.map((e) => linkOf(e)?.sequence_number),
    linked.map((_, k) => v1.length + 1 + k),
    'gapless in log order, whichever writer wrote it',
  );

  await ledger.readSide.sealer.checkpointAll(true);
  const live = await verifyOrgChain(ledger.store, ORG, ledger.key, ledger.origin);
  t.match(live, { ok: true, entries: v1.length + 41 }, JSON.stringify(live.problems));

  // The read model serves each linked fact as an entry with the verifier's hashes.
  const { rows } = await ledger.db.query<{ sequence_number: string; entry_hash: string; source_event_id: string }>('SELECT sequence_number::text, entry_hash, source_event_id::text FROM audit_events WHERE org_id = $1 ORDER BY audit_events.sequence_number', [ORG]);
  t.equal(rows.length, v1.length + 41, 'one read-model row per entry');
  t.equal(rows[rows.length - 1]!.entry_hash, live.tip_hash, 'the newest row carries the chain tip');
  t.same(
    rows.slice(v1.length).map((r) => r.source_event_id),
    linked.map((e) => e.id),
  );

  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'chain-v2-write-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  await exportChain(ledger.store, ORG, ledger.origin, dir);
  t.match(await verifyExport(dir, vkey), { ok: true, entries: v1.length + 41 });
  t.same(verifyBundleDir(dir, vkey), { ok: true, entries: v1.length + 41 }, 'the independent verifier agrees');

  // Windowed verification (the health walk) over the v1 part, the switch and the linked facts; then a linked fact edited in the log.
  const tip = v1.length + 41;
  t.same((await verifyRange(ledger.store, ledger.db, ORG, 1, tip, ledger.key, ledger.origin)).problems, [], 'the whole chain, window by window, is clean');
  t.match(await verifyRange(ledger.store, ledger.db, ORG, v1.length + 2, tip, ledger.key, ledger.origin), { entries: tip - v1.length - 1, problems: [] }, 'a window starting inside the linked part');
  const victim = linked[10]!;
  await ledger.db.query(`UPDATE es_events SET data = '{"project_id":"prj_forged","name":"forged"}' WHERE event_id = $1`, [victim.id]);
  t.match((await verifyRange(ledger.store, ledger.db, ORG, 1, tip, ledger.key, ledger.origin)).problems[0], { kind: 'hash_mismatch', sequence_number: v1.length + 11 }, 'an edited linked fact is found at its sequence');
  await ledger.db.query(`UPDATE es_events SET data = $2 WHERE event_id = $1`, [victim.id, JSON.stringify(victim.data)]);

  // What old code would write: an unlinked fact of the switched organization, inserted as its es_append does. Refused.
  const insertOld = (org: string, id: string) =>
    ledger.db.transaction(async (tx) => {
      const { rows: h } = await tx.query<{ position: string }>('SELECT position::text FROM es_log_head WHERE id = 1 FOR UPDATE');
      const pos = BigInt(h[0]!.position) + 1n;
      await tx.query(`INSERT INTO es_events (position, event_id, stream_name, stream_revision, event_type, data, metadata) VALUES ($1, $2, $3, 0, 'test.noted', '{}', $4)`, [pos.toString(), id, `old-${id}`, JSON.stringify({ ...meta(0), org_id: org })]);
      await tx.query('UPDATE es_log_head SET position = $1 WHERE id = 1', [pos.toString()]);
    });
  await t.rejects(insertOld(ORG, crypto.randomUUID()), /es_chain_switched/, 'an older writer cannot put a fact beside the chain');
  await insertOld('org_still_v1', crypto.randomUUID());
  t.pass('an organization whose chain has not switched takes the older writer’s facts');
  t.match(await verifyOrgChain(ledger.store, ORG, ledger.key, ledger.origin), { ok: true }, 'the switched chain is untouched');
});
