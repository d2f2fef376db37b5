import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { checkpointStream, CHECKPOINT_EVENT_TYPE } from '../../src/audit/chain.ts';
import { exportChain, verifyExport } from '../../src/audit/export.ts';
import { linkEvent, SWITCH_EVENT_TYPE, switchStream } from '../../src/audit/link.ts';
import { leafHash, rootOf } from '../../src/audit/merkle.ts';
import { signCheckpoint, verifierKey } from '../../src/audit/note.ts';
import { chainItems, verifyOrgChain } from '../../src/audit/verifier.ts';
import type { RecordedEvent } from '../../src/eventstore/port.ts';
import { testLedger } from '../helpers/ledger.ts';
import { verifyBundleDir } from './independent-verifier.ts';

// A switched chain in the real PostgreSQL log: v1 entries sealed by the
// sealer, then the switch and linked events appended as the v2 writer will
// (the link in the event's metadata, in the event's own append), a
// checkpoint signed over both. The live verifier, the export
// bundle, verify-export and the independent verifier all read it; a linked
// event edited in the log is caught.

const ORG = 'org_switch';

for (const kind of ['postgres', 'esdb'] as const) {
  t.test(`a chain with v1 entries, the switch and v2 entries in the live log (${kind})`, async (t) => {
    // A version 1 sealer: the test switches the chain itself, as the v2 writer will.
    const ledger = await testLedger(t, { checkpointEveryEntries: 2, store: kind, auditFormat: 1 });
    const vkey = verifierKey(ledger.key.name, ledger.key.publicKey);

    /** Appends one event with its link in its metadata, through the store (everything hashed is known before the append). */
    async function appendLinked(e: Omit<RecordedEvent, 'revision' | 'position' | 'recordedAt'>, seq: number, prev: string): Promise<string> {
      const salt = Buffer.alloc(16, seq).toString('hex');
      const { link, entryHash } = linkEvent({ ...e, revision: 0n, position: '', recordedAt: '' }, seq, prev, salt);
      await ledger.store.appendToStream(e.streamName, [{ id: e.id, type: e.type, data: e.data, metadata: { ...e.metadata, audit_link: link } }], { expectedRevision: 'any' });
      return entryHash;
    }

    const ctx = ledger.ctx(ORG);
    await ledger.run(orgDecider, orgStream(ORG), { type: 'create_org', orgId: ORG, name: 'Switch', defaultProjectId: `prj_${ORG}`, owner: { userId: 'usr_switch', email: 'owner@example.com', displayName: null } }, ctx);
    await ledger.settle();
    await ledger.readSide.sealer.checkpointAll(true);
    // The v1 sealer stops here: from now on the facts carry their links.
    await ledger.readSide.sealer.stop();
    const v1 = [];
    for await (const item of chainItems(ledger.store, ORG)) v1.push(item);
    t.equal(v1.length, 3, 'creating an organization sealed three v1 entries');
    const hashes = v1.map((i) => ('entry' in i ? i.entry.entry_hash : ''));
    const meta = { org_id: ORG, actor: { kind: 'system', id: 'test' }, occurred_at: new Date().toISOString(), schema_version: 1 };
    let prev = await appendLinked({ id: crypto.randomUUID(), type: SWITCH_EVENT_TYPE, streamName: switchStream(ORG), data: { org_id: ORG, format: 2, from_sequence: 4 }, metadata: meta }, 4, hashes[2]!);
    hashes.push(prev);
    for (let s = 5; s <= 7; s++) {
      prev = await appendLinked({ id: crypto.randomUUID(), type: 'test.noted', streamName: `note-${ORG}`, data: { n: s, text: `fact ${s}` }, metadata: meta }, s, prev);
      hashes.push(prev);
    }
    // Another organization's fact in between is not part of this chain.
    await ledger.store.appendToStream('note-org_other', [{ type: 'test.noted', data: { n: 1 }, metadata: { ...meta, org_id: 'org_other' } }]);
    // A link the chain's head does not back (a forged or stale one) is refused by the store, nothing written.
    if (kind === 'postgres') {
      const forged = linkEvent({ id: crypto.randomUUID(), type: 'test.noted', streamName: `note-${ORG}`, data: { n: 99 }, metadata: meta, revision: 0n, position: '', recordedAt: '' }, 5, hashes[3]!, '00'.repeat(16));
      await t.rejects(ledger.store.appendToStream(`note-${ORG}`, [{ type: 'test.noted', data: { n: 99 }, metadata: { ...meta, audit_link: forged.link } }]), { code: 'wrong_expected_revision' }, 'a second entry 5 is refused, as a conflict, nothing written');
    }
    // A checkpoint over all seven, signed as the sealer signs.
    const root = rootOf(hashes.map((h) => leafHash(Buffer.from(h, 'hex'))), 7);
    const note = signCheckpoint({ origin: `${ledger.origin}/${ORG}`, size: 7, root }, ledger.key);
    const last = (await ledger.store.readStream(checkpointStream(ORG), { direction: 'backwards', maxCount: 1 }))[0]!;
    await ledger.store.appendToStream(checkpointStream(ORG), [{ type: CHECKPOINT_EVENT_TYPE, data: { org_id: ORG, size: 7, root_hash: root.toString('hex'), note, key_name: ledger.key.name, verifier_key: vkey, signed_at: new Date().toISOString() }, metadata: { org_id: ORG, actor: { kind: 'system', id: 'test' } } }], { expectedRevision: last.revision });

    const live = await verifyOrgChain(ledger.store, ORG, ledger.key, ledger.origin);
    t.match(live, { ok: true, entries: 7, tip_hash: hashes[6] }, JSON.stringify(live.problems));
    t.ok(live.checkpoints_checked >= 2, 'the v1 checkpoints and the one over the switched chain');

    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'chain-v2-live-'));
    t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
    const manifest = await exportChain(ledger.store, ORG, ledger.origin, dir);
    t.match(manifest, { entries: 7, tip_hash: hashes[6] });
    t.match(await verifyExport(dir, vkey), { ok: true, entries: 7 });
    t.same(verifyBundleDir(dir, vkey), { ok: true, entries: 7 }, 'the independent verifier agrees');

    if (kind !== 'postgres') return;
    // A linked fact edited in the log: the live verifier and the next export both catch it.
    await ledger.db.query(`UPDATE es_events SET data = '{"n":6,"text":"forged"}' WHERE stream_name = $1 AND stream_revision = 1`, [`note-${ORG}`]);
    t.match((await verifyOrgChain(ledger.store, ORG, ledger.key, ledger.origin)).first_problem, { kind: 'hash_mismatch', sequence_number: 6 });
    const bad = await fs.mkdtemp(path.join(os.tmpdir(), 'chain-v2-live-bad-'));
    t.teardown(() => fs.rm(bad, { recursive: true, force: true }));
    await exportChain(ledger.store, ORG, ledger.origin, bad);
    t.match((await verifyExport(bad, vkey)).first_problem, { kind: 'hash_mismatch', sequence_number: 6 });
    t.match(verifyBundleDir(bad, vkey), { ok: false, kind: 'hash_mismatch', sequence_number: 6 });

    // The same fact removed from the log: a gap where it was (as a v1 stream's missing revision), not every later entry out of place.
    await ledger.db.query('DELETE FROM es_events WHERE stream_name = $1 AND stream_revision = 1', [`note-${ORG}`]);
    const gapped = await verifyOrgChain(ledger.store, ORG, ledger.key, ledger.origin);
    t.same(gapped.problems.map((p) => [p.kind, p.sequence_number, p.to_sequence]), [['sequence_gap', 6, 6]], 'one problem: entry 6 is missing');
    const holed = await fs.mkdtemp(path.join(os.tmpdir(), 'chain-v2-live-gap-'));
    t.teardown(() => fs.rm(holed, { recursive: true, force: true }));
    await exportChain(ledger.store, ORG, ledger.origin, holed);
    t.match(verifyBundleDir(holed, vkey), { ok: false, kind: 'sequence_gap', sequence_number: 6 }, 'the independent verifier reads the same gap in the export');
  });
}
