import t from 'tap';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// Policies before every tool call (tool name `<server>/<tool>`, the session's
// end user as the agent): a denial records no call and answers the spec's
// bare 403; a budget counts the input's amount; an approval-required rule
// holds the call, and approving it runs the held input once, in its session.

const { app, ledger, sandboxProviders } = await testApp(t, { providers: true });
const org = await bootstrapOrg(app, 'ToolPolicies');
const post = (url: string, payload: unknown, headers: Record<string, string> = org.key) => app.inject({ method: 'POST', url, headers, payload: payload as Record<string, unknown> });
await post('/v1/connections', { server_id: 'acme-payments', secret: sandboxProviders!.issueCredential('acme-payments') });
const session = (await post('/v1/sessions', { servers: ['acme-payments', 'clima'], user_id: 'alice' })).json();
const execute = (tool: string, input: Record<string, unknown>) => post(`/v1/sessions/${session.id}/execute`, { tool, input });
const calls = async () => (await app.inject({ method: 'GET', url: '/v1/tool-calls?count_only=true', headers: org.key })).json().count as number;
const clear = async () => {
  for (const p of (await app.inject({ method: 'GET', url: '/v1/policies', headers: org.key })).json()) await app.inject({ method: 'DELETE', url: `/v1/policies/${p.id}`, headers: org.key });
};

t.test('deny: the bare 403 with the rule, no tool call recorded', async (t) => {
  const rule = (await post('/v1/policies', { name: 'no charges for alice', type: 'deny', agents: ['alice'], tools: ['acme-payments/*'] })).json();
  const before = await calls();
  const r = await execute('acme-payments/create_charge', { amount_minor: 100, currency: 'BRL', description: 'x' });
  t.equal(r.statusCode, 403);
  t.same(r.json(), { reason: 'denied_by_policy', ruleType: 'deny', ruleId: rule.id });
  t.equal(await calls(), before, 'nothing recorded');
  t.equal((await execute('clima/get_forecast', { city: 'Recife' })).statusCode, 200, 'another server is not concerned');
  await clear();
});

t.test('budget over the input amount, exact under 20 concurrent calls', async (t) => {
  await post('/v1/policies', { name: 'charges budget', type: 'budget', tools: ['acme-payments/create_charge'], config: { amount_minor: 500, currency: 'BRL', window_seconds: 3600 } });
  const results = await Promise.all(Array.from({ length: 20 }, () => execute('acme-payments/create_charge', { amount_minor: 100, currency: 'BRL', description: 'x' })));
  t.equal(results.filter((r) => r.statusCode === 200).length, 5, '5 charges of 100 fit a budget of 500');
  t.ok(results.filter((r) => r.statusCode !== 200).every((r) => r.statusCode === 403 && r.json().reason === 'budget_exceeded'));
  await clear();
});

t.test('approval-required: held, approved, executed once in its session', async (t) => {
  const rule = (await post('/v1/policies', { name: 'a person approves charges', type: 'approval-required', tools: ['acme-payments/create_charge'] })).json();
  const before = await calls();
  const held = await execute('acme-payments/create_charge', { amount_minor: 4200, currency: 'BRL', description: 'held' });
  t.equal(held.statusCode, 403);
  t.match(held.json(), { reason: 'approval_required', ruleType: 'approval-required', ruleId: rule.id, approval_id: /^apr_/ });
  const a = (await app.inject({ method: 'GET', url: `/v1/approvals/${held.json().approval_id}`, headers: org.key })).json();
  t.match(a, { session_id: session.id, agent_id: 'alice', tool_name: 'acme-payments/create_charge', tool_input: { amount_minor: 4200, currency: 'BRL', description: 'held' }, status: 'pending' });
  t.equal(await calls(), before, 'nothing ran yet');
  const decided = await post(`/v1/approvals/${a.id}/decide`, { decision: 'approve', reason: 'ok' }, org.owner);
  t.equal(decided.statusCode, 200, decided.body);
  t.match(decided.json(), { status: 'approved', execution_result: { tool_call_id: /^tc_\d+$/, output: { id: /^ch_/ } } });
  await ledger.settle();
  t.equal(await calls(), before + 1, 'the held call ran once');
  const tc = (await app.inject({ method: 'GET', url: `/v1/tool-calls/${decided.json().execution_result.tool_call_id}`, headers: org.key })).json();
  t.match(tc, { session_id: session.id, status: 'success', input: { amount_minor: 4200 } });
  await clear();
});
