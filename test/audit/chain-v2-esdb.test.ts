import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { auditStream } from '../../src/audit/chain.ts';
import { exportChain, verifyExport } from '../../src/audit/export.ts';
import { decodeLink, LINK_RECORD_TYPE, type LinkRecordData, linkedEntryHash, linkRecordFor, SWITCH_EVENT_TYPE } from '../../src/audit/link.ts';
import { verifierKey } from '../../src/audit/note.ts';
import { Sealer } from '../../src/audit/sealer.ts';
import { verifyRange } from '../../src/audit/windows.ts';
import { verifyOrgChain } from '../../src/audit/verifier.ts';
import type { RecordedEvent } from '../../src/eventstore/port.ts';
import { auditEntries } from '../../src/usecases/audit-proofs.ts';
import { listAuditEvents } from '../../src/usecases/audit.ts';
import { readCheckpoint } from '../../src/projector/checkpoints.ts';
import { testLedger } from '../helpers/ledger.ts';
import { until } from '../helpers/wait.ts';
import { verifyBundleDir } from './independent-verifier.ts';

// Version 2 on EventStoreDB (docs/audit-chain.md, "Version 2 on EventStoreDB"),
// through the protocol double: the store cannot write a fact and its chain's
// head in one append, so the sealer links each fact by a record in the
// chain's own stream, appended at the stream's expected revision (the one
// writer a chain can have: a second sealer's append is refused, it reads the
// chain again). A chain sealed in version 1, switched, then linked: every
// reader (the live walk, the export, verify-export, the independent verifier,
// the windows, the monitors' feed, the audit read model) takes it; two sealers
// racing leave one chain; a forged record is caught at its sequence.

const ORG = 'org_esdb_v2';

t.test('a chain on EventStoreDB: version 1 entries, the switch in the chain stream, link records', async (t) => {
  const ledger = await testLedger(t, { store: 'esdb', auditFormat: 1, checkpointEveryEntries: 2 });
  const vkey = verifierKey(ledger.key.name, ledger.key.publicKey);
  const ctx = ledger.ctx(ORG);
  await ledger.run(orgDecider, orgStream(ORG), { type: 'create_org', orgId: ORG, name: 'Esdb', defaultProjectId: `prj_${ORG}`, owner: { userId: 'usr_esdb_v2', email: 'owner@example.com', displayName: null } }, ctx);
  await ledger.settle();
  const v1Size = Number((await ledger.store.readStream(auditStream(ORG), { direction: 'backwards', maxCount: 1 }))[0]!.revision) + 1;
  t.ok(v1Size >= 1, 'version 1 entries first');

  // The version 1 sealer stops; two version 2 sealers take over the same log at once (two instances).
  await ledger.readSide.sealer.stop();
  const sealers = [1, 2].map(() => new Sealer(ledger.db, ledger.store, { signingKey: ledger.key, origin: ledger.origin, checkpointEveryEntries: 2, format: 2 }));
  await Promise.all(sealers.map((s) => s.start()));
  t.teardown(() => Promise.all(sealers.map((s) => s.stop())));
  const before = (await ledger.store.readStream(orgStream(ORG), { maxCount: 1000 })).length;
  for (let i = 0; i < 6; i++) {
    await ledger.run(orgDecider, orgStream(ORG), { type: 'create_project', projectId: `prj_v2_${i}`, name: `P${i}`, slug: `p-${i}`, environment: 'test', settings: { i } }, ctx);
  }
  const facts = (await ledger.store.readStream(orgStream(ORG), { fromRevision: BigInt(before), maxCount: 1000 })).map((e) => e.id);
  t.ok(facts.length >= 6);
  const stream = async () => ledger.store.readStream(auditStream(ORG), { maxCount: 1000 });
  const records = await until(async () => {
    const all = await stream();
    const linked = all.filter((e) => e.type === LINK_RECORD_TYPE);
    return facts.every((id) => linked.some((e) => (e.data as unknown as LinkRecordData).event_id === id)) && all;
  }, 'every fact linked');

  t.equal(records[v1Size]!.type, SWITCH_EVENT_TYPE, 'the switch is the next entry of the chain stream');
  t.same(records.slice(0, v1Size).map((e) => e.type), Array(v1Size).fill('audit.entry_sealed'));
  const linkRecords = records.slice(v1Size + 1);
  t.ok(linkRecords.every((e) => e.type === LINK_RECORD_TYPE), 'after the switch only link records');
  const named = linkRecords.map((e) => (e.data as unknown as LinkRecordData).event_id);
  t.equal(new Set(named).size, named.length, 'each fact linked once, though two sealers followed the log');
  t.ok(linkRecords.every((e) => !('payload' in e.data) && JSON.stringify(e.data).length < 600), 'a record copies nothing of its fact');

  // The entry is the fact with its link: the same hash PostgreSQL's linked fact has.
  const first = linkRecords[0]!.data as unknown as LinkRecordData;
  const [fact] = await ledger.store.readStream(first.stream, { fromRevision: BigInt(first.revision), maxCount: 1 });
  t.equal(linkedEntryHash(fact!, decodeLink(first.link)!), first.entry_hash);
  t.equal(decodeLink(first.link)!.sequence_number, v1Size + 2);

  await until(async () => (await ledger.db.query('SELECT 1 FROM audit_checkpoints WHERE org_id = $1 AND size >= $2', [ORG, records.length])).rowCount > 0, 'a checkpoint over the switched chain');
  const live = await verifyOrgChain(ledger.store, ORG, ledger.key, ledger.origin);
  t.match(live, { ok: true, entries: records.length }, JSON.stringify(live.problems));

  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'chain-v2-esdb-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  t.match(await exportChain(ledger.store, ORG, ledger.origin, dir), { entries: records.length });
  t.match(await verifyExport(dir, vkey), { ok: true, entries: records.length });
  t.same(verifyBundleDir(dir, vkey), { ok: true, entries: records.length }, 'the independent verifier agrees');

  t.match(await verifyRange(ledger.store, ledger.db, ORG, v1Size, records.length, ledger.key, ledger.origin), { entries: records.length - v1Size + 1, problems: [] }, 'a window across the switch');
  t.match(await verifyRange(ledger.store, ledger.db, ORG, v1Size + 3, records.length, ledger.key, ledger.origin), { problems: [] }, 'a window after it');

  // The monitors' feed serves the linked facts as on PostgreSQL; the read model serves their data from the log.
  const feed = await auditEntries(ledger, ORG, { after_sequence: v1Size, limit: 100 });
  t.match(feed.entries[0], { format: 2, sequence_number: v1Size + 1, event: { event_type: SWITCH_EVENT_TYPE } });
  t.match(feed.entries[1], { format: 2, sequence_number: v1Size + 2, event: { event_id: first.event_id, data: fact!.data } });
  await until(async () => (await ledger.db.query('SELECT 1 FROM audit_events WHERE org_id = $1 AND sequence_number = $2', [ORG, records.length])).rowCount > 0, 'the read model at the tip');
  const listed = await listAuditEvents(ledger, { orgId: ORG }, { from: 0, to: Date.now() + 60_000, limit: 100 });
  const row = listed.events.find((e) => e.sequence_number === v1Size + 2);
  t.match(row, { event_type: fact!.type, entry_hash: first.entry_hash, payload: fact!.data }, 'the payload read from the log');

  // A restart that lost the chain's state row (a crash between an append and the row): the next sealer reads the chain
  // from its stream (v1 entries, the switch, the records) and links the next fact on its true tip.
  await Promise.all(sealers.map((s) => s.stop()));
  await ledger.db.query('DELETE FROM audit_chain_state WHERE org_id = $1', [ORG]);
  const restarted = new Sealer(ledger.db, ledger.store, { signingKey: ledger.key, origin: ledger.origin, checkpointEveryEntries: 2, format: 2 });
  await restarted.start();
  await ledger.run(orgDecider, orgStream(ORG), { type: 'create_project', projectId: 'prj_v2_after', name: 'After', slug: 'after', environment: 'test', settings: {} }, ctx);
  const grown = await until(async () => {
    const all = await stream();
    return all.length > records.length && all;
  }, 'the fact after the restart linked');
  await restarted.stop();
  const next = grown[records.length]!;
  t.equal(next.type, LINK_RECORD_TYPE, 'linked, not sealed in version 1: the chain is known to have switched');
  t.equal(decodeLink((next.data as unknown as LinkRecordData).link)!.prev_hash, (records[records.length - 1]!.data as unknown as LinkRecordData).entry_hash, 'on the true tip');
  t.match(await verifyOrgChain(ledger.store, ORG, ledger.key, ledger.origin), { ok: true, entries: grown.length });

  // A forged record (a fact linked on the wrong previous hash), appended where the next entry goes: caught at its sequence.
  const tip = grown.length;
  const forged = linkRecordFor(fact!, tip + 1, '0'.repeat(64), '11'.repeat(16));
  await ledger.store.appendToStream(auditStream(ORG), [{ type: LINK_RECORD_TYPE, data: forged.data as unknown as RecordedEvent['data'], metadata: { org_id: ORG, actor: { kind: 'system', id: 'forger' } } }], { expectedRevision: BigInt(tip - 1) });
  t.match((await verifyOrgChain(ledger.store, ORG, ledger.key, ledger.origin)).first_problem, { kind: 'link_mismatch', sequence_number: tip + 1 });
  // One naming a fact that is not where it says: a source_mismatch there.
  const missing = { ...forged.data, event_id: crypto.randomUUID(), link: linkRecordFor(fact!, tip + 2, forged.entryHash, '22'.repeat(16)).data.link };
  await ledger.store.appendToStream(auditStream(ORG), [{ type: LINK_RECORD_TYPE, data: missing as unknown as RecordedEvent['data'], metadata: { org_id: ORG, actor: { kind: 'system', id: 'forger' } } }], { expectedRevision: BigInt(tip) });
  const report = await verifyOrgChain(ledger.store, ORG, ledger.key, ledger.origin);
  t.ok(report.problems.some((p) => p.kind === 'source_mismatch' && p.sequence_number === tip + 2), JSON.stringify(report.problems));
  // One not in a record's shape at all: reported, and the audit read model goes on past it.
  const junk = await ledger.store.appendToStream(auditStream(ORG), [{ type: LINK_RECORD_TYPE, data: { nonsense: true }, metadata: { org_id: ORG, actor: { kind: 'system', id: 'forger' } } }], { expectedRevision: BigInt(tip + 1) });
  const walked = await verifyOrgChain(ledger.store, ORG, ledger.key, ledger.origin);
  t.ok(walked.problems.some((p) => p.kind === 'source_mismatch' && p.sequence_number === tip + 3), JSON.stringify(walked.problems));
  await until(async () => {
    const cp = await readCheckpoint(ledger.db, 'audit');
    return cp !== undefined && cp.position >= junk.lastPosition && cp.status === 'running';
  }, 'the audit read model past the malformed record, running');
});
