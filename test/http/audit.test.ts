import t from 'tap';
import { clampAuditLimit } from '../../src/http/audit/audit-schemas.ts';
import { verifyInclusion } from '../../src/audit/merkle.ts';
import { bootstrapOrg, platform, testApp } from '../helpers/app.ts';
import { nodeArgs } from '../helpers/entry.ts';
import { storedEntryEvent } from '../helpers/audit-entries.ts';

const { app, ledger } = await testApp(t);
const org = await bootstrapOrg(app, 'Audited');
const get = (url: string, headers: Record<string, string> = org.key) => app.inject({ method: 'GET', url, headers });
for (let i = 0; i < 12; i++) await app.inject({ method: 'POST', url: '/v1/projects', headers: org.key, payload: { name: `P${i}`, slug: `p-${i}` } });
await app.inject({ method: 'POST', url: '/v1/agents', headers: org.key, payload: { agent_id: 'a1', principal_ref: 'p' } });

t.test('limit clamping, exactly as the spec says', async (t) => {
  const cases: [string | undefined, number][] = [
[undefined, 50], ['', 50], ['0', 50], ['abc', 50], ['-5', 1], ['1', 1], ['200', 200], ['201', 200], ['7.9', 7], ['1e9', 200]];
  for (const [raw, want] of cases) t.equal(clampAuditLimit(raw), want, `${String(raw)} → ${want}`);
});

t.test('events: newest first, filters, a full-page walk visits every event once', async (t) => {
  const all = (await get('/v1/audit-events?limit=200')).json();
  t.ok(all.events.length >= 18, `${all.events.length} events`);
  t.equal(all.next_before_sequence, null, 'not a full page');
  const seqs = all.events.map((e: { sequence_number: number }) => e.sequence_number);
  t.same(seqs, [...seqs].sort((a: number, b: number) => b - a), 'newest first');
  t.match(all.events[0], { sequence_number: Number, event_type: String, happened_at: /Z$/, prev_hash: /^[0-9a-f]{64}$/, entry_hash: /^[0-9a-f]{64}$/ });
  // Walk with pages of 5.
  const seen: number[] = [];
  let url = '/v1/audit-events?limit=5';
  for (;;) {
    const page = (await get(url)).json();
    seen.push(...page.events.map((e: { sequence_number: number }) => e.sequence_number));
    if (page.next_before_sequence === null) break;
    t.equal(page.next_before_sequence, page.events[page.events.length - 1].sequence_number);
    url = `/v1/audit-events?limit=5&before_sequence=${page.next_before_sequence}`;
  }
  t.same(seen, seqs, 'every event exactly once');
  const exact = (await get('/v1/audit-events?event_type=project.created&limit=200')).json().events;
  t.ok(exact.length >= 13 && exact.every((e: { event_type: string }) => e.event_type === 'project.created'));
  const prefix = (await get('/v1/audit-events?event_type=agent.&limit=200')).json().events;
  t.same(prefix.map((e: { event_type: string }) => e.event_type), ['agent.registered']);
  t.same((await get('/v1/audit-events?event_type=agent&limit=200')).json().events, [], 'no dot, no prefix match');
  const from = new Date(Date.now() + 3_600_000).toISOString();
  t.same((await get(`/v1/audit-events?from=${from}&to=${new Date(Date.now() + 7_200_000).toISOString()}`)).json().events, []);
  for (const [q, code] of [
    ['before_sequence=abc', 'invalid_before_sequence'],
    ['before_sequence=-1', 'invalid_before_sequence'],
    ['from=yesterday', 'invalid_iso_8601'],
    ['to=2026-13-45T00:00:00Z', 'invalid_iso_8601'],
    ['from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z', 'from_after_to'],
  ] as const) {
    const r = await get(`/v1/audit-events?${q}`);
    t.same([r.statusCode, r.json().error.code], [400, code], q);
  }
});

t.test('config: defaults, validation with nothing written, the human-session order', async (t) => {
  const cfg = (await get('/v1/audit-events/config')).json();
  t.match(cfg, { org_id: org.orgId, verification_window_days: 90, hot_window_days: 7, hot_max_staleness_seconds: 3600, warm_window_days: 30, initial_walk_completed_at: null });
  const patch = (body: Record<string, unknown>, headers: Record<string, string> = org.owner) => app.inject({ method: 'PATCH', url: '/v1/audit-events/config', headers, payload: body });
  const before = await ledger.store.readStream(`audit_config-${org.orgId}`);
  const reg = await patch({ hot_max_staleness_seconds: 259_201 });
  t.same([reg.statusCode, reg.json().error.code, reg.json().error.details.limit], [400, 'regulatory_minimum_violation', 259200]);
  const order = await patch({ hot_window_days: 40 });
  t.same([order.statusCode, order.json().error.code], [400, 'window_ordering_invalid']);
  t.same(order.json().error.details.limit, { hot_window_days: 40, warm_window_days: 30, verification_window_days: 90 });
  t.same(await ledger.store.readStream(`audit_config-${org.orgId}`), before, 'nothing written');
  // Part 5 item 8: an API key gets 403 human_session_required first, even without x-svc-user.
  const key = await patch({ hot_window_days: 3 }, org.key);
  t.same([key.statusCode, key.json().error.code], [403, 'human_session_required']);
  const keyWithUser = await patch({ hot_window_days: 3 }, { ...org.key, 'x-svc-user': org.ownerId });
  t.same([keyWithUser.statusCode, keyWithUser.json().error.code], [403, 'human_session_required']);
  t.same((await patch({ hot_window_days: 3 }, platform)).json(), { error: 'unauthorized' }, 'no acting user: 401');
  t.same((await patch({ hot_window_days: 3 }, { ...platform, 'x-svc-user': '' })).statusCode, 401, 'blank acting user: 401');
  const member = (await app.inject({ method: 'POST', url: '/v1/team/members', headers: org.owner, payload: { email: 'm@audited.example', role: 'member' } })).json();
  t.same((await patch({ hot_window_days: 3 }, { ...platform, 'x-svc-user': member.user_id })).json(), { error: 'insufficient_role', required: 'admin' });
  const ok = await patch({ hot_window_days: 3, hot_max_staleness_seconds: 600 });
  t.equal(ok.statusCode, 200);
  t.match(ok.json(), { hot_window_days: 3, hot_max_staleness_seconds: 600 });
  await ledger.settle();
  const types = (await get('/v1/audit-events?event_type=audit.&limit=200')).json().events.map((e: { event_type: string }) => e.event_type);
  t.ok(types.includes('audit.config_updated'), 'the change is an event in the chain');
  // The deprecated organization-scoped forms.
  t.equal((await get(`/v1/orgs/${org.orgId}/audit/config`)).json().hot_window_days, 3);
  const scoped = await app.inject({ method: 'PATCH', url: `/v1/orgs/${org.orgId}/audit/config`, headers: org.owner, payload: { hot_window_days: 4 } });
  t.same([scoped.statusCode, scoped.json().hot_window_days], [200, 4], 'the organization-scoped form changes it too');
  t.equal((await get('/v1/orgs/org_someoneelse/audit/config')).statusCode, 403);
  const bound = (await app.inject({ method: 'POST', url: '/v1/api-keys', headers: org.owner, payload: { name: 'b', environment: 'test', project_id: org.projectId } })).json().key;
  t.equal((await get(`/v1/orgs/${org.orgId}/audit/health`, { authorization: `Bearer ${bound}` })).statusCode, 403, 'a project key');
  t.equal((await get(`/v1/orgs/${org.orgId}/audit/health`, { ...platform, 'x-svc-user': member.user_id })).statusCode, 403, 'a member below admin');
  t.equal((await get(`/v1/orgs/${org.orgId}/audit/health`, org.owner)).statusCode, 200, 'an owner');
});

t.test('tamper → broken, one incident, acknowledge checks, health green only after a clean walk', async (t) => {
  await ledger.settle();
  let h = (await get('/v1/audit-events/health')).json();
  t.equal(h.actionable_status, 'verifying');
  t.match(h.detail, /No verification run/);
  const clean = await ledger.readSide.verifier.verifyOrg(org.orgId);
  t.ok(clean.ok);
  h = (await get('/v1/audit-events/health')).json();
  t.same([h.status, h.actionable_status], ['healthy', 'healthy']);
  t.equal(h.verification.watermark_sequence, h.last_sequence_number);
  t.equal(h.verification.coverage_ratio, 1);
  t.not((await get('/v1/audit-events/config')).json().initial_walk_completed_at, null, 'the first full walk is recorded');

  // Tamper with one stored event by SQL: entry 6's payload.
  const original = await storedEntryEvent(ledger.db, ledger.store, org.orgId, 6);
  await ledger.db.query('UPDATE es_events SET data = $2::json WHERE position = $1', [original.position, JSON.stringify(original.forged)]);
  await ledger.readSide.verifier.verifyOrg(org.orgId);
  h = (await get('/v1/audit-events/health')).json();
  t.same([h.status, h.actionable_status], ['degraded', 'broken']);
  t.match(h.detail, /sequence 6/);
  await ledger.readSide.verifier.verifyOrg(org.orgId);
  await ledger.settle();
  const incidents = (await get('/v1/audit-events/incidents')).json().incidents;
  t.equal(incidents.length, 1, 'exactly one incident, even after re-verification');
  t.match(incidents[0], { detected_at_sequence: 6, status: 'open', anpd_notification_status: 'pending_assessment', kind: 'hash_mismatch' });
  t.equal((await get('/v1/audit-events/health')).json().incidents.open_count, 1);

  const ack = (body: Record<string, unknown>) => app.inject({ method: 'POST', url: `/v1/audit-events/incidents/${incidents[0].id}/acknowledge`, headers: org.owner, payload: body });
  const good = { personal_data_affected: false, resolution_summary: 'Restored from backup.', anpd_notification_status: 'not_required' };
  const invalid: [Record<string, unknown>, string, string][] = [
    [{ ...good, resolution_summary: '', anpd_notification_status: 'pending_assessment' }, 'pending_assessment_not_terminal', ''],
    [{ ...good, personal_data_affected: undefined }, 'personal_data_affected', 'empty'],
    [{ ...good, personal_data_affected: 'no' }, 'personal_data_affected', 'invalid_type'],
    [{ ...good, resolution_summary: '\u0000\u0007\u007f' }, 'resolution_summary', 'empty'],
    [{ ...good, resolution_summary: 42 }, 'resolution_summary', 'empty'],
    [{ ...good, resolution_summary: 'x'.repeat(8001) }, 'resolution_summary', 'too_long'],
    [{ ...good, anpd_notification_status: 'maybe' }, 'anpd_notification_status', 'invalid_enum'],
    [{ ...good, incident_reference: 7 }, 'incident_reference', 'invalid_type'],
    [{ ...good, incident_reference: 'r'.repeat(257) }, 'incident_reference', 'too_long'],
    [{ ...good, affected_from_sequence: 3 }, 'affected_to_sequence', 'paired_required'],
    [{ ...good, affected_from_sequence: 9, affected_to_sequence: 3 }, 'affected_from_sequence', 'range_inconsistent'],
  ];
  for (const [body, field, reason] of invalid) {
    const r = await ack(body);
    t.equal(r.statusCode, 400, `${field} ${reason}`);
    if (field === 'pending_assessment_not_terminal') t.equal(r.json().error.code, 'pending_assessment_not_terminal', 'checked first');
    else t.match(r.json().error, { code: 'field_invalid', details: { field, reason } });
  }
  const withControls = await ack({ ...good, resolution_summary: 'x'.repeat(7998) + '\u0000\u0001\u0002\ud800', incident_reference: 'INC-\u0000\u00071' });
  t.equal(withControls.statusCode, 200, 'controls (U+0000 too) stripped before the length check');
  t.match(withControls.json().incident, { status: 'acknowledged', anpd_notification_status: 'not_required', acknowledgement: { incident_reference: 'INC-1', resolution_summary: 'x'.repeat(7998) + '\ufffd' } });
  t.equal((await ack(good)).json().error.code, 'incident_already_acknowledged');
  h = (await get('/v1/audit-events/health')).json();
  t.equal(h.actionable_status, 'broken', 'acknowledging never turns health green');
  t.equal(h.incidents.acknowledged_count_30d, 1);

  // Undo the tamper: a clean walk turns it green.
  await ledger.db.query('UPDATE es_events SET data = $2::json WHERE position = $1', [original.position, JSON.stringify(original.data)]);
  await ledger.readSide.verifier.verifyOrg(org.orgId);
  h = (await get('/v1/audit-events/health')).json();
  t.same([h.status, h.actionable_status], ['healthy', 'healthy']);
});

t.test('a deleted entry shows as link_unverifiable with a sequence_gap segment', async (t) => {
  const other = await bootstrapOrg(app, 'Gapped');
  for (let i = 0; i < 4; i++) await app.inject({ method: 'POST', url: '/v1/projects', headers: other.key, payload: { name: `G${i}`, slug: `g-${i}` } });
  await ledger.settle();
  await ledger.db.query('DELETE FROM es_events WHERE position = $1', [(await storedEntryEvent(ledger.db, ledger.store, other.orgId, 3)).position]);
  await ledger.readSide.verifier.verifyOrg(other.orgId);
  const h = (await get('/v1/audit-events/health', other.key)).json();
  t.equal(h.actionable_status, 'link_unverifiable');
  t.match(h.verification.chain_link_check, { unverifiable_segments: 1, oldest_unverifiable_segment: { from_sequence: 3, to_sequence: 3, reason: 'sequence_gap' } });
  t.equal(h.status, 'degraded');
});

t.test('an inclusion proof from the API verifies against the published checkpoint', async (t) => {
  await ledger.readSide.sealer.checkpointAll(true);
  await ledger.settle();
  const cps = (await get('/v1/audit-events/checkpoints')).json();
  t.ok(cps.checkpoints.length >= 1);
  t.ok(cps.verifier_keys[0].startsWith('test-audit+'));
  const p = (await get('/v1/audit-events/3/proof')).json();
  t.equal(p.leaf_index, 2);
  const { leafHash } = await import('../../src/audit/merkle.ts');
  const { openCheckpoint, parseVerifierKey } = await import('../../src/audit/note.ts');
  const opened = openCheckpoint(p.checkpoint, parseVerifierKey(cps.verifier_keys[0]));
  t.ok(opened.signatureValid, 'the checkpoint is signed by the published key');
  t.ok(verifyInclusion(p.leaf_index, p.tree_size, leafHash(Buffer.from(p.entry_hash, 'hex')), p.proof.map((x: string) => Buffer.from(x, 'hex')), opened.checkpoint.root), 'the proof verifies');
  t.equal((await get('/v1/audit-events/999999/proof')).statusCode, 404);
});

t.test('GET /v1/audit-events/export streams a bundle the offline verifier accepts', async (t) => {
  const { spawnSync } = await import('node:child_process');
  const fs = await import('node:fs/promises');
  const os = await import('node:os');
  const path = await import('node:path');
  await ledger.settle();
  const res = await get('/v1/audit-events/export');
  t.equal(res.statusCode, 200);
  t.match(res.headers['content-type'], /application\/x-ndjson/);
  const lines = res.body.trim().split('\n').map((l) => JSON.parse(l));
  t.equal(lines[0].type, 'manifest');
  t.ok(lines.filter((l) => l.type === 'entry').length >= 18);
  const file = path.join(await fs.mkdtemp(path.join(os.tmpdir(), 'export-')), 'bundle.ndjson');
  t.teardown(() => fs.rm(path.dirname(file), { recursive: true, force: true }));
  await fs.writeFile(file, res.body);
  const key = (await get('/v1/audit-events/checkpoints')).json().verifier_keys[0];
  const run = spawnSync(process.execPath, [...nodeArgs('src/cli.ts'), 'audit', 'verify-export', file, '--key', key], { encoding: 'utf8' });
  t.equal(run.status, 0, run.stderr);
  t.match(JSON.parse(run.stdout), { ok: true, key_source: 'pinned' });
});
