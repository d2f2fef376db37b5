import fs from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { parseCosignerKey } from '../../src/audit/cosignature.ts';
import { SWITCH_EVENT_TYPE } from '../../src/audit/link.ts';
import { leafHash, rootOf } from '../../src/audit/merkle.ts';
import { type Evidence, monitorOnce, verifyEvidence } from '../../src/audit/monitor.ts';
import { generateSigningKey, signCheckpoint, verifierKey } from '../../src/audit/note.ts';
import { type TrustedLog, Witness } from '../../src/audit/witness.ts';
import { WitnessSubmitter, type WitnessEndpoint } from '../../src/audit/witness-client.ts';
import { AUDIT_ORIGIN } from '../../src/runtime.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { independentlyProven, viewProxy } from '../helpers/audit-views.ts';

// Issue 57: the monitor and a witness on a switched chain, from outside (real
// HTTP, real PostgreSQL). A service writing version 2 (an organization's first
// facts sealed as version 1 entries, then the switch, then each fact its own
// entry with its link in the event) is followed by a monitor re-hashing every
// entry against the tiles. Then the log
// shows two monitors two views: one monitor the history the witness cosigned,
// the other a history of the same size with one entry changed, its tiles and
// its checkpoint made and signed with the log's own key (a split view). Each
// view is consistent in itself; the second monitor catches the split through
// the witness's cosignature, with evidence checked here by node:crypto alone.

t.test('a switched chain: the monitor re-hashes it through the switch; a split view shown to two monitors is caught through the witness', async (t) => {
  const dir = t.testdir({});
  const logs: TrustedLog[] = [];
  const witness = new Witness({ key: generateSigningKey('w1.example/witness'), logs, stateFile: path.join(dir, 'w1.json') });
  const endpoint: WitnessEndpoint = { url: await witness.listen(), vkey: witness.verifierKey, key: parseCosignerKey(witness.verifierKey) };
  t.teardown(() => witness.close());
  const { app, ledger } = await testApp(t, { auditFormat: 2, checkpointEveryEntries: 1 << 20, auditWitnesses: [endpoint] });
  logs.push({ originPrefix: `${AUDIT_ORIGIN}/`, key: ledger.key });
  const base = await app.listen({ port: 0, host: '127.0.0.1' });
  const org = await bootstrapOrg(app);
  const get = (url: string) => app.inject({ method: 'GET', url, headers: org.key });
  for (let i = 0; i < 20; i++) {
    const r = await app.inject({ method: 'POST', url: '/v1/agents', headers: org.key, payload: { agent_id: `buyer-${i}`, principal_ref: `person-${i}` } });
    t.equal(r.statusCode, 201, 'an agent registered');
  }
  await ledger.settle();
  await ledger.readSide.sealer.checkpointAll(true);
  await ledger.settle();
  await new WitnessSubmitter(ledger.db, ledger.store, [endpoint], { timeoutMs: 10_000 }).runOnce();
  await ledger.settle();

  const cp = (await get('/v1/audit-events/checkpoint')).json() as { size: number; note: string; cosigned: { size: number; note: string } | null };
  t.ok(cp.cosigned && cp.cosigned.size === cp.size, 'the witness cosigned the latest checkpoint');
  const entries = (await get(`/v1/audit-events/entries?after_sequence=0&limit=${cp.size}`)).json().entries as { format?: number; event?: { event_type: string } }[];
  t.equal(entries.length, cp.size, 'every entry of the checkpoint is served');
  const at = entries.findIndex((e) => e.event?.event_type === SWITCH_EVENT_TYPE);
  t.ok(at > 0, "the organization's first facts were sealed as version 1 entries, then the chain switched");
  t.ok(entries.slice(0, at).every((e) => e.format === undefined), 'version 1 entries before the switch');
  t.ok(entries.slice(at).every((e) => e.format === 2), 'from the switch on, every entry is the fact itself, with its link');
  t.ok(entries.length - at > 20, 'the agents registered after the switch are linked entries');
  // A linked entry is served with its fact's data, read from the log: the read model keeps no copy of it.
  const listed = (await get('/v1/audit-events?event_type=agent.registered&limit=200')).json().events as { payload: { agent_id: string; principal_ref: string } | null }[];
  t.same(listed.map((e) => `${e.payload?.agent_id}/${e.payload?.principal_ref}`).sort(), Array.from({ length: 20 }, (_, i) => `buyer-${i}/person-${i}`).sort(), "each agent's entry is served with the fact's data");
  const rows = (await ledger.db.query<{ linked: number; copies: number }>('SELECT count(*) FILTER (WHERE payload_in_log)::int AS linked, count(payload) FILTER (WHERE payload_in_log)::int AS copies FROM audit_events WHERE org_id = $1', [org.orgId])).rows[0]!;
  t.same([rows.linked >= 20, rows.copies], [true, 0], `${rows.linked} linked entries, none with a copy of its payload`);
  t.match((await get('/v1/audit-events/health')).json().witnesses, [{ cosigned_size: cp.size, lag_entries: Number }], "the witness's latest cosignature, in the health");

  const logKey = verifierKey(ledger.key.name, ledger.key.publicKey);
  const policy = { witnesses: [endpoint.vkey], quorum: 1 };
  const shown = await monitorOnce({ baseUrl: base, apiKey: org.testKey, orgId: org.orgId, stateFile: path.join(dir, 'a.json'), logKey, ...policy, entries: true });
  t.match(shown, { ok: true, size: cp.size, new_entries: cp.size, quorum_met: true, witnessed_size: cp.size }, 'the first monitor re-hashes every entry (version 1, the switch, version 2) against the tiles');

  // The other view: the same size, one entry's leaf changed, its tiles and its checkpoint made and signed with the log's key.
  const genuine = Buffer.from(await (await fetch(`${base}/v1/audit-events/tile/0/0?width=${cp.size}`, { headers: { authorization: `Bearer ${org.testKey}` } })).arrayBuffer());
  t.equal(genuine.length, cp.size * 32, 'the genuine tile');
  const leaves: Buffer[] = Array.from({ length: cp.size }, (_, i) => genuine.subarray(i * 32, i * 32 + 32));
  leaves[cp.size - 2] = leafHash(Buffer.from('another fact'));
  const forged = Buffer.concat(leaves);
  const note = signCheckpoint({ origin: `${AUDIT_ORIGIN}/${org.orgId}`, size: cp.size, root: rootOf(leaves, cp.size) }, ledger.key);
  const via = await viewProxy(t, base, { checkpoint: (b) => ({ ...b, note }), tile: (_n, width) => forged.subarray(0, width * 32) });

  const alone = await monitorOnce({ baseUrl: via, apiKey: org.testKey, orgId: org.orgId, stateFile: path.join(dir, 'b-alone.json'), logKey });
  t.match(alone, { ok: true, size: cp.size }, 'without a witness the other view is consistent in itself: one monitor alone cannot tell');
  const other = await monitorOnce({ baseUrl: via, apiKey: org.testKey, orgId: org.orgId, stateFile: path.join(dir, 'b.json'), logKey, ...policy, evidenceFile: path.join(dir, 'split.json') });
  t.equal(other.ok, false, 'the second monitor, holding the witness policy, refuses the view');
  if (other.ok) return;
  t.equal(other.problem.kind, 'fork', 'the witness cosigned another root of the same size');
  const ev = JSON.parse(await fs.readFile(other.evidence_file!, 'utf8')) as Evidence;
  t.ok(independentlyProven(ev), 'the evidence (two signed roots of one size) holds with node:crypto and the log key alone');
  t.equal(verifyEvidence(ev, logKey).proven, true, 'and with the monitor’s own evidence check, the log key pinned');
  t.equal(ev.trusted_checkpoint, cp.cosigned!.note, 'one note is the cosigned one the first monitor follows');

  const again = await monitorOnce({ baseUrl: base, apiKey: org.testKey, orgId: org.orgId, stateFile: path.join(dir, 'a.json'), logKey, ...policy, entries: true });
  t.match(again, { ok: true, size: cp.size, new_entries: 0 }, 'the first monitor, shown the genuine view, is unmoved');
});
