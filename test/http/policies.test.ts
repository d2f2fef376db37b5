import t from 'tap';
import { bootstrapOrg, platform, testApp, testClock } from '../helpers/app.ts';
import { ApprovalExpiryReactor } from '../../src/reactors/approval-expiry.ts';
import { roleInProject } from '../../src/usecases/team.ts';

// Policies (spec 4.11) enforced on mandate spends, and approvals (Part 2,
// 4.10): CRUD, every type, order, counters under concurrency, time windows
// across a DST change, approvals held, decided, executed once, expired.

const clock = testClock();
const { app, ledger } = await testApp(t, { now: clock.now });
const org = await bootstrapOrg(app, 'Policies');
const other = await bootstrapOrg(app, 'Elsewhere');
type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
const inject = (method: Method, url: string, payload?: unknown, headers: Record<string, string> = org.key) =>
  app.inject({ method, url, headers, ...(payload !== undefined ? { payload: payload as Record<string, unknown> } : {}) });
const ok = async (method: Method, url: string, payload?: unknown, status = 200, headers?: Record<string, string>) => {
  const r = await inject(method, url, payload, headers);
  if (r.statusCode !== status) throw new Error(`${method} ${url}: expected ${status}, got ${r.statusCode}: ${r.body}`);
  return r.statusCode === 204 ? null : r.json();
};

await ok('POST', '/v1/agents', { agent_id: 'buyer', principal_ref: 'p' }, 201);
await ok('POST', '/v1/agents', { agent_id: 'helper-1', principal_ref: 'p' }, 201);
const consumer = await ok('POST', '/v1/consumers', { display_name: 'Ana' }, 201);
const mandate = async (agent = 'buyer', cap = '100000') =>
  ok('POST', '/v1/mandates', {
    consumer_id: consumer.id,
    agent_id: agent,
    purpose: 'groceries',
    merchant_allowlist: ['shop@pix.example'],
    merchant_pin_kind: 'pix-key',
    cap_minor: cap,
    per_tx_cap_minor: cap,
    currency: 'BRL',
    expires_at: Math.floor(clock.now().getTime() / 1000) + 30 * 86_400,
  }, 201);
const spendOn = (id: string, amount = '10') => inject('POST', `/v1/consumers/mandates/${id}/spend`, { amount_minor: amount, currency: 'BRL', merchant: 'shop@pix.example' });
const clear = async () => {
  for (const p of await ok('GET', '/v1/policies')) await ok('DELETE', `/v1/policies/${p.id}`, undefined, 204);
};
const policy = (body: Record<string, unknown>) => ok('POST', '/v1/policies', body, 201);

t.test('CRUD: shapes in camelCase, order, config checked per type, tenancy', async (t) => {
  await clear();
  const a = await policy({ name: 'no night', type: 'deny', agents: ['buyer'], tools: ['mandate.*'] });
  t.match(a, { id: /^pol_/, name: 'no night', type: 'deny', config: {}, agents: ['buyer'], tools: ['mandate.*'], enabled: true, order: 1, createdAt: String, updatedAt: String });
  const b = await policy({ name: 'budget', type: 'budget', config: { amount_minor: 500, currency: 'BRL', window_seconds: 3600 } });
  t.equal(b.order, 2);
  t.same(b.config, { amount_minor: '500', currency: 'BRL', window_seconds: 3600, per: 'agent' }, 'config stored parsed, defaults applied');

  const bad: [Record<string, unknown>, string][] = [
    [{ name: 'x', type: 'budget', config: { amount_minor: 0, currency: 'BRL', window_seconds: 60 } }, 'zero budget'],
    [{ name: 'x', type: 'budget' }, 'budget without config'],
    [{ name: 'x', type: 'rate-limit', config: { max_calls: 5 } }, 'rate limit without window'],
    [{ name: 'x', type: 'time-window', config: { timezone: 'Mars/Olympus', days: ['mon'], start: '09:00', end: '17:00' } }, 'unknown zone'],
    [{ name: 'x', type: 'time-window', config: { timezone: 'UTC', days: ['mon'], start: '9am', end: '17:00' } }, 'bad hour'],
    [{ name: 'x', type: 'allow', config: { surprise: true } }, 'unknown config key'],
    [{ name: 'x', type: 'maybe' }, 'unknown type'],
    [{ type: 'deny' }, 'no name'],
    [{ name: 'x', type: 'deny', agents: ['a*b'] }, 'star inside a pattern'],
  ];
  const before = await ledger.store.headPosition();
  for (const [body, why] of bad) {
    const r = await inject('POST', '/v1/policies', body);
    t.equal(r.statusCode, 400, why);
    t.equal(r.json().error.code, 'invalid_body', why);
    t.ok(Array.isArray(r.json().error.details.issues), `${why}: issues`);
  }
  t.same((await ledger.store.readAll({ after: before, maxCount: 100 })).filter((e) => e.type.startsWith('policy.')), [], 'nothing written');

  const patched = await ok('PATCH', `/v1/policies/${b.id}`, { config: { amount_minor: '700', currency: 'BRL', window_seconds: 60, per: 'tool' }, enabled: false });
  t.match(patched, { enabled: false, config: { amount_minor: '700', per: 'tool' } });
  t.equal((await inject('PATCH', `/v1/policies/${b.id}`, { type: 'rate-limit' })).statusCode, 400, 'a type change needs a config that fits');
  t.equal((await ok('GET', `/v1/policies/${a.id}`)).name, 'no night');
  for (const [m, u, body] of [['GET', `/v1/policies/${a.id}`], ['PATCH', `/v1/policies/${a.id}`, { enabled: false }], ['DELETE', `/v1/policies/${a.id}`]] as const) {
    const r = await inject(m, u, body, other.key);
    t.equal(r.statusCode, 404, `${m} of another organization's policy`);
  }
  t.same(await ok('GET', '/v1/policies', undefined, 200, other.key), [], 'the other organization sees none');
});

t.test('reorder: atomic, a foreign id moves nothing', async (t) => {
  await clear();
  const p1 = await policy({ name: 'one', type: 'allow' });
  const p2 = await policy({ name: 'two', type: 'allow' });
  const p3 = await policy({ name: 'three', type: 'allow' });
  const foreign = await ok('POST', '/v1/policies', { name: 'theirs', type: 'allow' }, 201, other.key);
  const r = await inject('POST', '/v1/policies/reorder', { ids: [p3.id, foreign.id] });
  t.equal(r.statusCode, 404);
  t.same((await ok('GET', '/v1/policies')).map((p: { id: string }) => p.id), [p1.id, p2.id, p3.id], 'nothing moved');
  await ok('POST', '/v1/policies/reorder', { ids: [p3.id, p1.id] }, 204);
  const now = await ok('GET', '/v1/policies');
  t.same(now.map((p: { id: string; order: number }) => [p.id, p.order]), [[p3.id, 1], [p1.id, 2], [p2.id, 3]], 'listed first, the rest after');
});

t.test('every type × match / no match × enabled / disabled, exact 403 bodies', async (t) => {
  const m = await mandate();
  const cases: { type: string; config?: Record<string, unknown>; deny: Record<string, unknown> | null }[] = [
    { type: 'allow', deny: null },
    { type: 'deny', deny: { reason: 'denied_by_policy' } },
    { type: 'budget', config: { amount_minor: 5, currency: 'BRL', window_seconds: 3600 }, deny: { reason: 'budget_exceeded' } },
    { type: 'rate-limit', config: { max_calls: 1, window_seconds: 3600 }, deny: { reason: 'rate_limited_by_policy' } },
    { type: 'time-window', config: { timezone: 'UTC', days: ['mon'], start: '00:00', end: '00:01' }, deny: { reason: 'outside_time_window' } },
    { type: 'approval-required', deny: { reason: 'approval_required' } },
  ];
  for (const c of cases) {
    for (const enabled of [true, false]) {
      for (const agentMatches of [true, false]) {
        await clear();
        // rate-limit needs one call used up before it denies
        const p = await policy({ name: c.type, type: c.type, agents: [agentMatches ? 'buy*' : 'someone-else'], tools: ['mandate.spend'], enabled, ...(c.config ? { config: c.config } : {}) });
        if (c.type === 'rate-limit' && enabled && agentMatches) t.equal((await spendOn(m.id, '1')).statusCode, 201, 'the first call fits the rate');
        const r = await spendOn(m.id, '10');
        const label = `${c.type} enabled=${enabled} match=${agentMatches}`;
        if (!enabled || !agentMatches || !c.deny || (c.type === 'time-window' && clock.now().getUTCDay() === 1 && clock.now().getUTCHours() === 0 && clock.now().getUTCMinutes() === 0)) {
          t.equal(r.statusCode, 201, `${label}: allowed`);
          continue;
        }
        t.equal(r.statusCode, 403, `${label}: refused`);
        const body = r.json();
        if (c.type === 'approval-required') {
          t.match(body, { reason: 'approval_required', ruleType: c.type, ruleId: p.id, approval_id: /^apr_/, expires_at: String }, label);
          t.same(Object.keys(body).sort(), ['approval_id', 'approval_url', 'expires_at', 'reason', 'ruleId', 'ruleType'], `${label}: nothing else`);
          t.equal(body.approval_url, `http://127.0.0.1:8080/dashboard/approvals/${body.approval_id}`, `${label}: the page that decides it`);
        } else {
          t.same(body, { ...c.deny, ruleType: c.type, ruleId: p.id }, `${label}: exact body`);
        }
      }
    }
  }
});

t.test('order: the first decisive rule wins', async (t) => {
  const m = await mandate();
  await clear();
  const allow = await policy({ name: 'allow buyer', type: 'allow', agents: ['buyer'] });
  const deny = await policy({ name: 'deny all', type: 'deny' });
  t.equal((await spendOn(m.id)).statusCode, 201, 'allow first: allowed');
  await ok('POST', '/v1/policies/reorder', { ids: [deny.id, allow.id] }, 204);
  const r = await spendOn(m.id);
  t.same(r.json(), { reason: 'denied_by_policy', ruleType: 'deny', ruleId: deny.id }, 'deny first: denied');
  // A PATCH is enforced by the very next request.
  await ok('PATCH', `/v1/policies/${deny.id}`, { enabled: false });
  t.equal((await spendOn(m.id)).statusCode, 201, 'disabled by PATCH: the next request passes');
  await ok('PATCH', `/v1/policies/${deny.id}`, { enabled: true, agents: ['helper-*'] });
  t.equal((await spendOn(m.id)).statusCode, 201, 'narrowed to other agents: passes');
  const helperMandate = await mandate('helper-1');
  t.equal((await spendOn(helperMandate.id)).statusCode, 403, 'a helper agent is denied');
});

t.test('budget and rate limit hold exactly under 50 concurrent calls', async (t) => {
  const m = await mandate();
  await clear();
  await policy({ name: 'ten cents an hour', type: 'budget', config: { amount_minor: 10, currency: 'BRL', window_seconds: 3600 } });
  const results = await Promise.all(Array.from({ length: 50 }, () => spendOn(m.id, '1')));
  t.equal(results.filter((r) => r.statusCode === 201).length, 10, 'exactly 10 spends of 1 fit a budget of 10');
  t.ok(results.filter((r) => r.statusCode !== 201).every((r) => r.statusCode === 403 && r.json().reason === 'budget_exceeded'), 'the rest are budget_exceeded');

  const m2 = await mandate();
  await clear();
  await policy({ name: 'ten calls', type: 'rate-limit', config: { max_calls: 10, window_seconds: 3600, per: 'organization' } });
  const limited = await Promise.all(Array.from({ length: 50 }, () => spendOn(m2.id, '1')));
  t.equal(limited.filter((r) => r.statusCode === 201).length, 10, 'exactly 10 calls fit a limit of 10');
  // The window rolls: an hour later there is room again.
  clock.advance(3_601_000);
  t.equal((await spendOn(m2.id, '1')).statusCode, 201, 'room again after the window');
  clock.advance(-3_601_000);

  // A spend the mandate declines gives its budget back.
  const small = await mandate('buyer', '5');
  await clear();
  await policy({ name: 'budget', type: 'budget', config: { amount_minor: 10, currency: 'BRL', window_seconds: 3600, per: 'organization' } });
  t.equal((await spendOn(small.id, '6')).statusCode, 422, 'declined by the mandate cap');
  t.equal((await spendOn(small.id, '5')).statusCode, 201);
  const big = await mandate('buyer', '100');
  t.equal((await spendOn(big.id, '5')).statusCode, 201, 'the declined 6 did not count against the budget');
  t.equal((await spendOn(big.id, '1')).statusCode, 403, 'now the budget of 10 is used');
});

t.test('time window in an IANA zone across a DST change (injected clock)', async (t) => {
  const { insideWindow } = await import('../../src/policy/evaluator.ts');
  const cfg = { timezone: 'America/New_York', days: ['sun'], start: '01:30', end: '03:30' };
  // 2026-03-08: clocks jump from 02:00 to 03:00 EST→EDT in New York.
  t.ok(insideWindow(cfg, new Date('2026-03-08T06:45:00Z')), '01:45 EST is inside');
  t.ok(insideWindow(cfg, new Date('2026-03-08T07:15:00Z')), '03:15 EDT is inside (the hour 02:00 did not exist)');
  t.notOk(insideWindow(cfg, new Date('2026-03-08T07:35:00Z')), '03:35 EDT is outside');
  t.notOk(insideWindow(cfg, new Date('2026-03-08T06:25:00Z')), '01:25 EST is outside');
  // 2026-11-01: 01:00–02:00 happens twice; both are inside 01:30–03:30 when past 01:30.
  const fall = { timezone: 'America/New_York', days: ['sun'], start: '01:30', end: '02:00' };
  t.ok(insideWindow(fall, new Date('2026-11-01T05:45:00Z')), 'first 01:45 (EDT)');
  t.ok(insideWindow(fall, new Date('2026-11-01T06:45:00Z')), 'second 01:45 (EST)');
  t.notOk(insideWindow(fall, new Date('2026-11-01T07:05:00Z')), '02:05 EST is outside');
  const night = { timezone: 'America/Sao_Paulo', days: ['fri'], start: '22:00', end: '02:00' };
  t.ok(insideWindow(night, new Date('2026-11-28T02:30:00Z')), 'Friday 23:30 in São Paulo');
  t.ok(insideWindow(night, new Date('2026-11-28T04:30:00Z')), 'Saturday 01:30 belongs to Friday’s window');
  t.notOk(insideWindow(night, new Date('2026-11-29T04:30:00Z')), 'Sunday 01:30 does not');

  // Through the API with the injected clock.
  const m = await mandate();
  await clear();
  const p = await policy({ name: 'business hours', type: 'time-window', config: { timezone: 'America/New_York', days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '09:00', end: '17:00' } });
  const at = (iso: string) => clock.advance(Date.parse(iso) - clock.now().getTime());
  at('2026-11-24T15:00:00Z'); // Tuesday 10:00 in New York
  t.equal((await spendOn(m.id)).statusCode, 201, 'inside business hours');
  at('2026-11-24T23:00:00Z'); // Tuesday 18:00
  t.same((await spendOn(m.id)).json(), { reason: 'outside_time_window', ruleType: 'time-window', ruleId: p.id });
  at(new Date(Date.now()).toISOString());
});

t.test('approvals: held, approved and executed once, denied, expired, health', async (t) => {
  const m = await mandate();
  await clear();
  // Approvals left pending by earlier cases are denied first, so the health figures start from zero.
  for (const left of (await ok('GET', '/v1/approvals?status=pending')).data) await ok('POST', `/v1/approvals/${left.id}/decide`, { decision: 'deny' }, 200, org.owner);
  const rule = await policy({ name: 'big spends need a person', type: 'approval-required', config: { approval_ttl_seconds: 600, min_amount_minor: 100 } });
  t.equal((await spendOn(m.id, '50')).statusCode, 201, 'below the threshold passes');
  const held = await spendOn(m.id, '150');
  t.equal(held.statusCode, 403);
  const { approval_id: id, expires_at } = held.json();
  const a = await ok('GET', `/v1/approvals/${id}`);
  t.match(a, { id, org_id: org.orgId, project_id: org.projectId, agent_id: 'buyer', matched_rule_id: rule.id, matched_rule_name: rule.name, tool_name: 'mandate.spend', status: 'pending', expires_at, decided_at: null, executed_at: null, execution_result: null });
  t.same(a.tool_input, { mandate_id: m.id, amount_minor: '150', currency: 'BRL', merchant: 'shop@pix.example', description: null, channel: 'api' }, 'the input, verbatim');
  t.equal((await inject('GET', `/v1/approvals/${id}`, undefined, other.key)).statusCode, 404, "another organization's approval");

  // Human-session rules: an API key is refused first, then a missing user, then a member.
  const decide = (headers: Record<string, string>, decision = 'approve') => app.inject({ method: 'POST', url: `/v1/approvals/${id}/decide`, headers, payload: { decision, reason: 'ok' } });
  t.equal((await decide(org.key)).json().error.code, 'human_session_required');
  t.equal((await decide(platform)).statusCode, 401);

  const approvedOf150 = async () => Number((await ledger.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM mandate_authorizations WHERE mandate_id = $1 AND decision = 'approved' AND amount_minor = 150`, [m.id])).rows[0]!.n);
  t.equal(await approvedOf150(), 0, 'held: not spent');
  const [r1, r2] = await Promise.all([decide(org.owner), decide(org.owner)]);
  t.same([r1.statusCode, r2.statusCode].sort(), [200, 409], 'two concurrent approves: one wins');
  const winner = r1.statusCode === 200 ? r1.json() : r2.json();
  t.match(winner, { status: 'approved', decided_by: org.ownerId, decision_reason: 'ok', executed_at: String, execution_result: { decision: 'approved', amount_minor: '150' } });
  t.equal(await approvedOf150(), 1, 'the held spend ran exactly once');

  // Deny.
  const held2 = (await spendOn(m.id, '200')).json();
  const denied = await app.inject({ method: 'POST', url: `/v1/approvals/${held2.approval_id}/decide`, headers: org.owner, payload: { decision: 'deny', reason: 'too much' } });
  t.match(denied.json(), { status: 'denied', executed_at: null });
  t.equal((await app.inject({ method: 'POST', url: `/v1/approvals/${held2.approval_id}/decide`, headers: org.owner, payload: { decision: 'approve' } })).json().error.code, 'approval_not_pending');

  // Expiry by the sweeper, and the health figures.
  const held3 = (await spendOn(m.id, '300')).json();
  let health = await ok('GET', `/v1/orgs/${org.orgId}/approvals/health`, undefined, 200, org.owner);
  t.match(health, { status: 'ok', pending_count: 1 });
  t.equal(typeof health.oldest_pending_age_seconds, 'number');
  const sweeper = new ApprovalExpiryReactor(ledger.db, ledger.store, clock.now);
  await sweeper.start();
  t.teardown(() => sweeper.stop());
  t.equal(await sweeper.tick(), 0, 'nothing stale yet');
  clock.advance(601_000);
  t.equal((await app.inject({ method: 'POST', url: `/v1/approvals/${held3.approval_id}/decide`, headers: org.owner, payload: { decision: 'approve' } })).json().error.code, 'approval_expired', 'too late to decide');
  t.equal(await sweeper.tick(), 1, 'the sweeper expires it');
  await ledger.readSide.waitFor(await ledger.store.headPosition(), 30_000);
  t.equal((await ok('GET', `/v1/approvals/${held3.approval_id}`)).status, 'expired');
  health = await ok('GET', `/v1/orgs/${org.orgId}/approvals/health`, undefined, 200, org.owner);
  t.match(health, { pending_count: 0, oldest_pending_age_seconds: null, last_sweep_at: String });
  t.equal((await ok('GET', `/v1/orgs/${org.orgId}/approvals/${id}`, undefined, 200, org.owner)).id, id);
  t.equal((await inject('GET', `/v1/orgs/${other.orgId}/approvals/${id}`, undefined, org.owner)).statusCode, 403, 'organization path check');
  const list = await ok('GET', '/v1/approvals?status=expired');
  t.same(list.data.map((x: { id: string }) => x.id), [held3.approval_id]);
  clock.advance(-601_000);
});

t.test('policy decisions are in the audit chain and it verifies', async (t) => {
  const events = (await ok('GET', '/v1/audit-events?event_type=policy.&limit=200')).events as { event_type: string }[];
  const types = new Set(events.map((e) => e.event_type));
  for (const ty of ['policy.created', 'policy.updated', 'policy.deleted', 'policy.reordered', 'policy.decided', 'policy.counter_consumed']) t.ok(types.has(ty), `${ty} sealed`);
  const approvals = (await ok('GET', '/v1/audit-events?event_type=approval.&limit=200')).events as { event_type: string }[];
  t.ok(approvals.some((e) => e.event_type === 'approval.executed'), 'approval.executed sealed');
  const report = await ledger.readSide.verifier.verifyOrg(org.orgId);
  t.ok(report.ok, 'the chain verifies');
});

t.test('a key bound to one project: reads the policies, cannot change them; sees its own project\'s approvals only', async (t) => {
  const p2 = await ok('POST', '/v1/projects', { name: 'Second', slug: 'second-bound' }, 201);
  const key = (await app.inject({ method: 'POST', url: '/v1/api-keys', headers: org.owner, payload: { name: 'bound', environment: 'test', project_id: p2.id } })).json().key;
  const bound = { authorization: `Bearer ${key}` };
  const policy = await ok('POST', '/v1/policies', { name: 'cap', type: 'deny', config: {} }, 201);
  const head = await ledger.store.headPosition();
  for (const [method, url, payload] of [
    ['POST', '/v1/policies', { name: 'x', type: 'allow', config: {} }],
    ['PATCH', `/v1/policies/${policy.id}`, { enabled: false }],
    ['DELETE', `/v1/policies/${policy.id}`, undefined],
    ['POST', '/v1/policies/reorder', { ids: [policy.id] }],
  ] as const) {
    const r = await inject(method, url, payload, bound);
    t.equal(r.statusCode, 403, `${method} ${url}`);
    t.equal(r.json().error, 'forbidden');
  }
  t.equal(await ledger.store.headPosition(), head, 'nothing written');
  t.ok((await ok('GET', '/v1/policies', undefined, 200, bound)).some((p: { id: string }) => p.id === policy.id), 'it reads them');

  const theirs = (await ok('GET', '/v1/approvals')).data as { id: string; project_id: string }[];
  t.ok(theirs.length > 0 && theirs.every((a) => a.project_id === org.projectId), "the default project's approvals, for the organization's key");
  t.same((await ok('GET', '/v1/approvals', undefined, 200, bound)).data, [], 'none for the bound key');
  const hidden = await inject('GET', `/v1/approvals/${theirs[0]!.id}`, undefined, bound);
  t.equal(hidden.statusCode, 404, "another project's approval answers as an absent one");
  await ok('DELETE', `/v1/policies/${policy.id}`, undefined, 204);
});

t.test("deciding a held call takes the person's role in the call's project (an override raises or narrows it)", async (t) => {
  const m = await mandate();
  await clear();
  const rule = await policy({ name: 'a person decides', type: 'approval-required', config: { approval_ttl_seconds: 600, min_amount_minor: 1 } });
  const raised = (await app.inject({ method: 'POST', url: '/v1/team/members', headers: org.owner, payload: { email: 'raised@pol.example', role: 'member' } })).json().user_id;
  const narrowed = (await app.inject({ method: 'POST', url: '/v1/team/members', headers: org.owner, payload: { email: 'narrowed@pol.example', role: 'admin' } })).json().user_id;
  for (const [user, role] of [[raised, 'admin'], [narrowed, 'member']]) {
    t.ok((await app.inject({ method: 'POST', url: `/v1/projects/${org.projectId}/members`, headers: org.owner, payload: { user_id: user, role } })).statusCode < 300);
  }
  const as = (user: string) => ({ ...platform, 'x-svc-user': user });
  const id = (await spendOn(m.id, '20')).json().approval_id as string;
  const refused = await app.inject({ method: 'POST', url: `/v1/approvals/${id}/decide`, headers: as(narrowed), payload: { decision: 'deny' } });
  t.same([refused.statusCode, refused.json()], [403, { error: 'insufficient_role', required: 'admin' }], 'an organization admin narrowed to member in the project');
  // The dashboard decides through the same rule (src/usecases/team.ts roleInProject).
  t.same([await roleInProject(ledger.db, narrowed, 'admin', org.projectId), await roleInProject(ledger.db, raised, 'member', org.projectId)], ['member', 'admin'], 'the dashboard takes the same role: narrowed to member, raised to admin');
  const decided = await app.inject({ method: 'POST', url: `/v1/approvals/${id}/decide`, headers: as(raised), payload: { decision: 'deny' } });
  t.equal(decided.statusCode, 200, 'a member raised to admin in the project decides');
  t.equal(decided.json().status, 'denied');
  await ok('DELETE', `/v1/policies/${rule.id}`, undefined, 204);
});
