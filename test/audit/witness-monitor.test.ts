import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import t from 'tap';
import { countCosigners, formatAddCheckpoint, parseCosignerKey } from '../../src/audit/cosignature.ts';
import { exportChain, verifyExport } from '../../src/audit/export.ts';
import { type Evidence, monitorOnce, readMonitorState, verifyEvidence } from '../../src/audit/monitor.ts';
import { generateSigningKey, signCheckpoint, verifierKey } from '../../src/audit/note.ts';
import { consistencyProofFromStore } from '../../src/audit/tree.ts';
import { type TrustedLog, Witness } from '../../src/audit/witness.ts';
import { WitnessSubmitter, type WitnessEndpoint } from '../../src/audit/witness-client.ts';
import type { NewEvent } from '../../src/eventstore/port.ts';
import { AUDIT_ORIGIN } from '../../src/runtime.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { independentlyProven, type View, viewProxy } from '../helpers/audit-views.ts';

// Two witnesses and a monitor on loopback against a running service (real
// HTTP, real PostgreSQL): a history of 10 000 entries cosigned 2 of 2 and
// followed by the monitor; a forged fork and a rollback served through a
// rewriting proxy, each caught with evidence checked here by code of the test
// alone; a witness refusing an inconsistent checkpoint (and the incident it
// raises); a witness down, then catching up; a hanging witness that never
// holds up a command.

const ORIGIN_PREFIX = `${AUDIT_ORIGIN}/`;

t.test('witnesses cosign, the monitor follows, forks and rollbacks are caught, a witness refuses and catches up', async (t) => {
  const dir = t.testdir({});
  const logs: TrustedLog[] = [];
  const keys = [generateSigningKey('w1.example/witness'), generateSigningKey('w2.example/witness')];
  const witnesses = keys.map((key, i) => new Witness({ key, logs, stateFile: path.join(dir, `w${i + 1}.json`) }));
  const urls = await Promise.all(witnesses.map((w) => w.listen()));
  t.teardown(() => Promise.all(witnesses.map((w) => w.close())));
  const endpoints: WitnessEndpoint[] = witnesses.map((w, i) => ({ url: urls[i]!, vkey: w.verifierKey, key: parseCosignerKey(w.verifierKey) }));
  const { app, ledger } = await testApp(t, { checkpointEveryEntries: 1 << 20, auditWitnesses: endpoints });
  logs.push({ originPrefix: ORIGIN_PREFIX, key: ledger.key });
  const base = await app.listen({ port: 0, host: '127.0.0.1' });
  const org = await bootstrapOrg(app);
  const get = (url: string) => app.inject({ method: 'GET', url, headers: org.key });
  const submitter = new WitnessSubmitter(ledger.db, ledger.store, endpoints, { timeoutMs: 10_000 });
  const logKey = verifierKey(ledger.key.name, ledger.key.publicKey);
  const policy = { witnesses: endpoints.map((e) => e.vkey), quorum: 2 };

  await ledger.settle();
  await ledger.readSide.sealer.checkpointAll(true); // an early checkpoint: the rollback served later
  // 10 000 facts through the event store (as the audit-scale bench writes them), sealed by the running sealer.
  const meta = { org_id: org.orgId, project_id: null, actor: { kind: 'system', id: 'bulk' }, request_id: null, correlation_id: null, causation_id: null, occurred_at: '2026-11-21T12:00:00.000Z', schema_version: 1 };
  for (let i = 0; i < 10_000; i += 1000) {
    const events: NewEvent[] = Array.from({ length: 1000 }, (_, k) => ({ type: 'audit.config_updated', data: { org_id: org.orgId, hot_window_days: 7, at: new Date(Date.UTC(2026, 10, 21, 12, 0, 0, i + k)).toISOString() }, metadata: meta as never }));
    await ledger.store.appendToStream(`bulk-${org.orgId}-${i}`, events);
  }
  await ledger.settle();
  await ledger.readSide.sealer.checkpointAll(true);
  await ledger.settle();

  await t.test('a normal history is cosigned 2 of 2 and the monitor follows it through 10 000 entries', async (t) => {
    await submitter.runOnce();
    await ledger.settle();
    const cp = (await get('/v1/audit-events/checkpoint')).json();
    t.ok(cp.cosigned, 'the checkpoint is served with its cosignatures');
    t.ok(cp.cosigned.size > 10_000, 'the cosigned checkpoint covers the 10 000 entries');
    t.same(countCosigners(cp.cosigned.note, endpoints.map((e) => e.key)).valid.length, 2, 'two valid cosignatures');
    t.same(cp.cosigned.witnesses.map((w: { name: string }) => w.name).sort(), keys.map((k) => k.name).sort());
    const started = Date.now();
    const r = await monitorOnce({ baseUrl: base, apiKey: org.testKey, orgId: org.orgId, stateFile: path.join(dir, 'monitor.json'), logKey, ...policy, entries: true });
    t.ok(r.ok, JSON.stringify(r));
    if (!r.ok) return;
    t.ok(r.new_entries >= 10_000, `the monitor re-hashed ${r.new_entries} entries (${Math.round(r.new_entries / ((Date.now() - started) / 1000))}/s)`);
    t.equal(r.quorum_met, true);
    t.equal(r.witnessed_size, cp.cosigned.size);
    const again = await monitorOnce({ baseUrl: base, apiKey: org.testKey, orgId: org.orgId, stateFile: path.join(dir, 'monitor.json'), ...policy, entries: true });
    t.ok(again.ok && again.new_entries === 0, 'a second pass with nothing new fetches nothing');
    const health = (await get('/v1/audit-events/health')).json();
    t.same(health.witnesses.map((w: { lag_entries: number }) => w.lag_entries), [0, 0], 'no witness lags');
    // Offline: the export bundle meets the 2-of-2 policy; a policy naming an unknown witness does not.
    const out = path.join(dir, 'bundle');
    await exportChain(ledger.store, org.orgId, AUDIT_ORIGIN, out);
    const rep = await verifyExport(out, logKey, policy);
    t.ok(rep.ok, JSON.stringify(rep.first_problem));
    t.equal(rep.witness_policy?.witnessed_size, cp.cosigned.size);
    const stranger = generateSigningKey('w3.example/witness');
    const strangerKey = new Witness({ key: stranger, logs, stateFile: path.join(dir, 'unused.json') }).verifierKey;
    const weak = await verifyExport(out, logKey, { witnesses: [endpoints[0]!.vkey, strangerKey], quorum: 2 });
    t.equal(weak.ok, false);
    t.equal(weak.first_problem?.kind, 'quorum_not_met');
  });

  await t.test('a forged fork (same size, another root) served to the monitor is caught with evidence that verifies independently', async (t) => {
    const trusted = (await readMonitorState(path.join(dir, 'monitor.json')))!;
    const rewrite: View = {};
    const via = await viewProxy(t, base, rewrite);
    rewrite.checkpoint = (b) => {
      const note = signCheckpoint({ origin: `${AUDIT_ORIGIN}/${org.orgId}`, size: trusted.size, root: createHash('sha256').update('another history').digest() }, ledger.key);
      return { ...b, note };
    };
    const r = await monitorOnce({ baseUrl: via, apiKey: org.testKey, orgId: org.orgId, stateFile: path.join(dir, 'monitor.json'), evidenceFile: path.join(dir, 'fork.json') });
    t.equal(r.ok, false);
    if (r.ok) return;
    t.equal(r.problem.kind, 'fork');
    const ev = JSON.parse(await fs.readFile(r.evidence_file!, 'utf8')) as Evidence;
    t.ok(independentlyProven(ev), 'the evidence holds with nothing but node:crypto and the log key');
    t.equal(verifyEvidence(ev, logKey).proven, true);
    t.equal((await readMonitorState(path.join(dir, 'monitor.json')))!.size, trusted.size, 'the trusted state did not move');
    // A forged note the key did not sign is a bad signature, not a fork.
    rewrite.checkpoint = (b) => ({ ...b, note: signCheckpoint({ origin: `${AUDIT_ORIGIN}/${org.orgId}`, size: trusted.size + 1, root: Buffer.alloc(32) }, generateSigningKey(ledger.key.name)) });
    const bad = await monitorOnce({ baseUrl: via, apiKey: org.testKey, orgId: org.orgId, stateFile: path.join(dir, 'monitor.json'), evidenceFile: path.join(dir, 'bad.json') });
    t.equal(!bad.ok && bad.problem.kind, 'bad_signature');
  });

  await t.test('a rollback (an older genuine checkpoint served as the latest) is caught with evidence', async (t) => {
    const first = (await get('/v1/audit-events/checkpoints')).json().checkpoints[0] as { note: string; size: number };
    const via = await viewProxy(t, base, { checkpoint: (b) => ({ ...b, note: first.note, size: first.size }) });
    const r = await monitorOnce({ baseUrl: via, apiKey: org.testKey, orgId: org.orgId, stateFile: path.join(dir, 'monitor.json'), evidenceFile: path.join(dir, 'rollback.json') });
    t.equal(!r.ok && r.problem.kind, 'rollback');
    const ev = JSON.parse(await fs.readFile(path.join(dir, 'rollback.json'), 'utf8')) as Evidence;
    t.ok(independentlyProven(ev), 'the evidence holds independently');
    t.equal(verifyEvidence(ev).proven, true);
  });

  await t.test('a witness refuses an inconsistent checkpoint; a refusal met by the service opens an incident', async (t) => {
    const w1 = witnesses[0]!;
    const cosigned = w1.checkpointOf(`${AUDIT_ORIGIN}/${org.orgId}`)!;
    const size = Number(cosigned.split('\n')[1]);
    const forked = signCheckpoint({ origin: `${AUDIT_ORIGIN}/${org.orgId}`, size, root: Buffer.alloc(32, 9) }, ledger.key);
    const post = (body: string) => fetch(`${urls[0]}/add-checkpoint`, { method: 'POST', body });
    t.equal((await post(formatAddCheckpoint(size, [], forked))).status, 422, 'the same size with another root');
    const longer = signCheckpoint({ origin: `${AUDIT_ORIGIN}/${org.orgId}`, size: size + 10, root: Buffer.alloc(32, 7) }, ledger.key);
    t.equal((await post(formatAddCheckpoint(size, [Buffer.alloc(32, 1)], longer))).status, 422, 'a bigger tree without a valid proof');
    const stale = await post(formatAddCheckpoint(3, [], longer));
    t.equal(stale.status, 409);
    t.equal(stale.headers.get('content-type'), 'text/x.tlog.size');
    t.equal(await stale.text(), `${size}\n`, 'a wrong old size answers the witness\'s size');
    t.equal((await post(formatAddCheckpoint(0, [], signCheckpoint({ origin: 'other/log', size: 1, root: Buffer.alloc(32) }, ledger.key)))).status, 404, 'an unknown origin');
    t.equal((await post(formatAddCheckpoint(size, [], signCheckpoint({ origin: `${AUDIT_ORIGIN}/${org.orgId}`, size, root: Buffer.alloc(32) }, generateSigningKey(ledger.key.name))))).status, 403, 'not signed by the log key');
    t.equal(w1.checkpointOf(`${AUDIT_ORIGIN}/${org.orgId}`), cosigned, 'the refusals left the witness state as it was');

    // A third witness that was shown another history at size 5 refuses the service's real checkpoint.
    const w3 = new Witness({ key: generateSigningKey('w3.example/witness'), logs, stateFile: path.join(dir, 'w3.json') });
    const url3 = await w3.listen();
    t.teardown(() => w3.close());
    const other = signCheckpoint({ origin: `${AUDIT_ORIGIN}/${org.orgId}`, size: 5, root: Buffer.alloc(32, 5) }, ledger.key);
    t.equal((await fetch(`${url3}/add-checkpoint`, { method: 'POST', body: formatAddCheckpoint(0, [], other) })).status, 200);
    const s3 = new WitnessSubmitter(ledger.db, ledger.store, [{ url: url3, vkey: w3.verifierKey, key: parseCosignerKey(w3.verifierKey) }]);
    await s3.runOnce();
    await ledger.settle();
    const incidents = (await get('/v1/audit-events/incidents')).json().incidents as { kind: string; detail: string }[];
    const refused = incidents.filter((i) => i.kind === 'witness_refused');
    t.equal(refused.length, 1, 'one incident');
    t.match(refused[0]!.detail, /w3\.example\/witness refused/);
    t.match(s3.status.get('w3.example/witness')!.last_error, /refused \(422\)/);
    await s3.runOnce();
    await ledger.settle();
    t.equal(((await get('/v1/audit-events/incidents')).json().incidents as { kind: string }[]).filter((i) => i.kind === 'witness_refused').length, 1, 'a second pass opens no second incident');
  });

  await t.test('a witness down for a while catches up; a hanging witness never holds up a command', async (t) => {
    const w2 = witnesses[1]!;
    const port2 = Number(new URL(urls[1]!).port);
    await w2.close();
    const meta2 = { ...meta, occurred_at: '2026-11-21T13:00:00.000Z' };
    await ledger.store.appendToStream(`bulk-${org.orgId}-late`, Array.from({ length: 300 }, (_, k) => ({ type: 'audit.config_updated', data: { org_id: org.orgId, hot_window_days: 7, at: new Date(Date.UTC(2026, 10, 21, 13, 0, 0, k)).toISOString() }, metadata: meta2 as never })));
    await ledger.settle();
    await ledger.readSide.sealer.checkpointAll(true);
    await ledger.settle();
    await submitter.runOnce();
    await ledger.settle();
    t.match(submitter.status.get(keys[1]!.name)!.last_error, /unreachable/, 'the down witness is reported');
    let lag = (await get('/v1/audit-events/health')).json().witnesses as { name: string; lag_entries: number }[];
    t.equal(lag.find((w) => w.name === keys[0]!.name)!.lag_entries, 0, 'the live witness caught up');
    t.ok(lag.find((w) => w.name === keys[1]!.name)!.lag_entries >= 300, 'the down witness lags by the new entries');
    const partial = await monitorOnce({ baseUrl: base, apiKey: org.testKey, orgId: org.orgId, stateFile: path.join(dir, 'monitor.json'), ...policy, entries: true });
    t.ok(partial.ok, 'the monitor still follows');
    // Back up on the same port with its state: the next pass sends the proof from its size.
    const back = new Witness({ key: keys[1]!, logs, stateFile: path.join(dir, 'w2.json') });
    await back.listen(port2);
    t.teardown(() => back.close());
    await submitter.runOnce();
    await ledger.settle();
    lag = (await get('/v1/audit-events/health')).json().witnesses;
    t.same(lag.map((w) => w.lag_entries), [0, 0], 'both witnesses are caught up');
    const cp = (await get('/v1/audit-events/checkpoint')).json();
    t.equal(countCosigners(cp.cosigned.note, endpoints.map((e) => e.key)).valid.length, 2, 'the new checkpoint is cosigned 2 of 2');
    const r = await monitorOnce({ baseUrl: base, apiKey: org.testKey, orgId: org.orgId, stateFile: path.join(dir, 'monitor.json'), ...policy, entries: true });
    t.ok(r.ok && r.quorum_met && r.witnessed_size === cp.cosigned.size, JSON.stringify(r));

    // A witness that accepts the connection and never answers: a command completes while the submission hangs.
    const held: http.ServerResponse[] = [];
    const hang = http.createServer((_req, res) => void held.push(res));
    await new Promise<void>((resolve) => hang.listen(0, '127.0.0.1', resolve));
    t.teardown(() => new Promise<void>((resolve) => (hang.closeAllConnections(), hang.close(() => resolve()))));
    const slowKey = generateSigningKey('slow.example/witness');
    const slowVkey = new Witness({ key: slowKey, logs, stateFile: path.join(dir, 'slow.json') }).verifierKey;
    const slow = new WitnessSubmitter(ledger.db, ledger.store, [{ url: `http://127.0.0.1:${(hang.address() as AddressInfo).port}`, vkey: slowVkey, key: parseCosignerKey(slowVkey) }], { timeoutMs: 120_000 });
    let done = false;
    const pass = slow.runOnce().then(() => (done = true));
    await new Promise<void>((resolve) => {
      const check = () => (held.length > 0 ? resolve() : setTimeout(check, 10));
      check();
    });
    const created = await app.inject({ method: 'POST', url: '/v1/projects', headers: org.key, payload: { name: 'During a hang', slug: 'during-a-hang' } });
    t.equal(created.statusCode, 201, created.body);
    t.equal(done, false, 'the command answered while the witness submission was still hanging');
    hang.closeAllConnections();
    await pass;
    t.match(slow.status.get('slow.example/witness')!.last_error, /unreachable/);
    // The proof a catching-up witness is sent is the stored tree's.
    t.ok((await consistencyProofFromStore(ledger.db, org.orgId, 5, cp.cosigned.size)).length > 0);
  });
});
