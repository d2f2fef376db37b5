import { Webhook } from 'standardwebhooks';
import t from 'tap';
import { bootstrapOrg, platform, testApp, testClock } from '../helpers/app.ts';

// Sessions and tool calls over HTTP, driven with the product client's exact
// wire shapes, against the sandbox providers on loopback.

const clock = testClock();
const { app, ledger, sandboxProviders } = await testApp(t, { providers: true, now: clock.now, sessionQuota: 5 });
const sb = sandboxProviders!;
const org = await bootstrapOrg(app, 'Sess');
const other = await bootstrapOrg(app, 'Elsewhere');

/** The product client's calls, byte for byte the bodies it sends. */
function client(headers: Record<string, string>) {
  const call = async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown) => {
    const r = await app.inject({ method, url, headers: { ...headers, ...(payload !== undefined ? { 'content-type': 'application/json' } : {}) }, ...(payload !== undefined ? { payload: JSON.stringify(payload) } : {}) });
    return { status: r.statusCode, body: r.body ? r.json() : undefined, headers: r.headers };
  };
  return {
    call,
    createSession: (userId: string, servers: string[], mocks?: Record<string, unknown>) => call('POST', '/v1/sessions', { servers, user_id: userId, ...(mocks ? { mocks } : {}) }),
    execute: (id: string, tool: string, input: Record<string, unknown>) => call('POST', `/v1/sessions/${id}/execute`, { tool, input }),
    connections: (id: string) => call('GET', `/v1/sessions/${id}/connections`),
    close: (id: string) => call('DELETE', `/v1/sessions/${id}`),
  };
}
const c = client(org.key);
const acme = (await app.inject({ method: 'POST', url: '/v1/connections', headers: org.key, payload: { server_id: 'acme-payments', secret: sb.issueCredential('acme-payments') } })).json();
await app.inject({ method: 'POST', url: '/v1/connections', headers: org.key, payload: { server_id: 'ledgerly', user_id: 'alice', secret: sb.issueCredential('ledgerly') } });

let sessionId = '';
let chargeCall = '';

t.test('the product client: create, list connections, execute, poll the payment view, close', async (t) => {
  const s = await c.createSession('alice', ['acme-payments', 'ledgerly', 'kambio', 'clima']);
  t.equal(s.status, 201, JSON.stringify(s.body));
  t.match(s.body, { id: /^ses_/, user_id: 'alice', status: 'active', servers: ['acme-payments', 'ledgerly', 'kambio', 'clima'], mcp: { url: `http://127.0.0.1:8080/v1/sessions/${s.body.id}/mcp`, headers: { 'x-svc-project': org.projectId } } });
  sessionId = s.body.id;

  const conns = await c.connections(sessionId);
  t.equal(conns.status, 200);
  t.same(
    conns.body.data.map((d: { id: string; connected: boolean }) => [d.id, d.connected]),
    [['acme-payments', true], ['ledgerly', true], ['kambio', false], ['clima', true]],
  );
  t.match(conns.body, { total: 4, session_id: sessionId, data: [{ id: 'acme-payments', name: /./, category: 'payments', country: /^[A-Z]{2}$/, auth_type: 'api_key', tools_count: 3, status: /./ }] });
  // The client's own reading of the same answer: servers and tools beside data.
  t.same(
    conns.body.servers.map((x: { id: string; connected: boolean; auth_type: string }) => [x.id, x.connected, x.auth_type]),
    [['acme-payments', true, 'api_key'], ['ledgerly', true, 'hmac_signed'], ['kambio', false, 'two_header'], ['clima', true, 'none']],
  );
  t.match(conns.body.servers[0], { id: 'acme-payments', name: conns.body.data[0].name, connected: true, auth_type: 'api_key', status: conns.body.data[0].status });
  // The client's ServerConnection {id, name, category, country, auth_type, connected} (issue 61 item 4).
  t.same(conns.body.servers.map((x: Record<string, unknown>) => [x.id, x.category, x.country]), conns.body.data.map((d: Record<string, unknown>) => [d.id, d.category, d.country]), 'servers carry category and country');
  t.equal(conns.body.tools.length, conns.body.data.reduce((n: number, d: { tools_count: number }) => n + d.tools_count, 0), 'every tool of every server');
  t.match(conns.body.tools.find((x: { name: string }) => x.name === 'create_charge'), { name: 'create_charge', server: 'acme-payments', description: /./, input_schema: { type: 'object', properties: { amount_minor: {} } } });
  t.ok(conns.body.tools.some((x: { name: string; server: string }) => x.name === 'get_forecast' && x.server === 'clima'));

  const x = await c.execute(sessionId, 'acme-payments/create_charge', { amount_minor: 2500, currency: 'BRL', description: 'tea' });
  t.equal(x.status, 200, JSON.stringify(x.body));
  t.same(Object.keys(x.body).sort(), ['called_at', 'data', 'duration', 'error', 'server', 'success', 'tool', 'tool_call_id'], 'the tool result, nothing else');
  t.match(x.body, { success: true, data: { id: /^ch_/, amount_minor: 2500 }, error: null, duration: Number, server: 'acme-payments', tool: 'create_charge', tool_call_id: /^tc_\d+$/, called_at: /Z$/ });
  chargeCall = x.body.tool_call_id;
  const record = await c.call('GET', `/v1/tool-calls/${chargeCall}`);
  t.match(record.body, { id: chargeCall, session_id: sessionId, server_id: 'acme-payments', tool_name: 'create_charge', status: 'success', called_at: x.body.called_at, duration_ms: x.body.duration, error_code: null, input: { amount_minor: 2500 }, output: x.body.data, routing: { environment: 'test' }, failover_trail: [{ attempt: 1, outcome: 'success' }] }, 'the full record stays at /v1/tool-calls');
  t.notOk('mocked' in record.body.routing, 'a real call is not marked mocked');

  const pv = await c.call('GET', `/v1/tool-calls/${chargeCall}/payment-status`);
  t.equal(pv.status, 200);
  t.same(pv.body, { tool_call_id: chargeCall, payment_status: 'succeeded', original_status: 'success', idempotency_key: x.body.data.id, events: [] });
  const vv = await c.call('GET', `/v1/tool-calls/${chargeCall.slice(3)}/verification-status`);
  t.same(vv.body, { tool_call_id: chargeCall, verification_status: 'unknown', original_status: 'success', idempotency_key: null, hosted_url: null, events: [] }, 'bare digits; no verification started');

  const closed = await c.close(sessionId);
  t.match(closed, { status: 200, body: { status: 'closed', closed_at: /Z$/ } });
  t.match(await c.call('GET', `/v1/sessions/${sessionId}`), { status: 200, body: { status: 'closed' } });
  t.match(await c.close(sessionId), { status: 200 }, 'closing twice is a no-op');
  t.match(await c.execute(sessionId, 'clima/get_forecast', { city: 'x' }), { status: 409, body: { error: { code: 'session_closed' } } });
});

t.test('a provider webhook naming the charge moves the payment view, each change listed', async (t) => {
  const secret = (await app.inject({ method: 'PUT', url: `/v1/connections/${acme.id}/webhook-secret`, headers: org.key })).json().secret as string;
  const key = (await c.call('GET', `/v1/tool-calls/${chargeCall}/payment-status`)).body.idempotency_key;
  const send = async (id: string, type: string, status: string) => {
    const body = JSON.stringify({ type, data: { id: key, status } });
    const at = clock.now();
    const r = await app.inject({ method: 'POST', url: `/v1/webhooks/acme-payments/${acme.id}`, headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': new Webhook(secret).sign(id, at, body) }, payload: body });
    t.equal(r.statusCode, 200, r.body);
  };
  await send('msg_1', 'charge.refunded', 'refunded');
  await ledger.settle();
  const v = (await c.call('GET', `/v1/tool-calls/${chargeCall}/payment-status`)).body;
  t.match(v, { payment_status: 'refunded', events: [{ event_type: 'charge.refunded', received_at: /Z$/ }] });
  t.equal(v.events.length, 1);
});

t.test('execute: a tool that ran and failed is a 200 tool result with success false; requests that never reached a tool keep their 4xx', async (t) => {
  const s = (await c.createSession('bob', ['acme-payments', 'kambio', 'ledgerly'])).body;
  const missing = await c.execute(s.id, 'acme-payments/get_charge', { charge_id: 'ch_missing' });
  t.equal(missing.status, 200, JSON.stringify(missing.body));
  t.match(missing.body, { success: false, data: null, error: 'provider_error: acme-payments answered 404: no charge ch_missing', duration: Number, server: 'acme-payments', tool: 'get_charge', tool_call_id: /^tc_\d+$/, called_at: /Z$/ });
  sb.faults.set('acme-payments', '401');
  const revoked = await c.execute(s.id, 'acme-payments/list_charges', {});
  sb.faults.delete('acme-payments');
  t.match(revoked, { status: 200, body: { success: false, error: 'credential_rejected: acme-payments rejected the credential (401): API key revoked by the provider', tool: 'list_charges' } }, "the code and the provider's words");
  t.match(await c.execute(s.id, 'ledgerly/list_entries', {}), { status: 424, body: { error: { code: 'not_connected' } } }, 'bob has no ledgerly connection');
  t.match(await c.execute(s.id, 'clima/get_forecast', { city: 'x' }), { status: 404, body: { error: { code: 'server_unknown' } } }, 'not attached to the session');
  t.match(await c.execute(s.id, 'acme-payments/refund', {}), { status: 404, body: { error: { code: 'tool_unknown' } } });
  t.match(await c.execute(s.id, 'acme-payments', {}), { status: 400, body: { error: { code: 'invalid_body' } } });
  t.match(await c.execute(s.id, 'acme-payments/create_charge', { currency: 'XXX' }), { status: 400, body: { error: { code: 'invalid_input' } } });
  const failed = (await c.call('GET', `/v1/tool-calls/${missing.body.tool_call_id}`)).body;
  t.match(failed, { status: 'error', error_code: 'provider_error', duration_ms: Number, failover_trail: [{ outcome: 'error', error_code: 'provider_error' }] });
  await c.close(s.id);
});

t.test('tool calls in the audit chain verify; count_only; before/since paging', async (t) => {
  await ledger.settle();
  const audit = (await app.inject({ method: 'GET', url: '/v1/audit-events?event_type=tool_call.&limit=200', headers: org.key })).json().events as { event_type: string }[];
  const types = audit.map((e) => e.event_type);
  t.ok(types.includes('tool_call.succeeded') && types.includes('tool_call.failed'), types.join());
  t.ok((await ledger.readSide.verifier.verifyOrg(org.orgId)).ok, 'the chain verifies');

  const all = (await c.call('GET', '/v1/tool-calls?limit=200')).body.tool_calls as { id: string; called_at: string }[];
  const count = (await c.call('GET', '/v1/tool-calls?count_only=true')).body;
  t.same(count, { count: all.length });
  t.ok(all.length >= 4);
  const page1 = (await c.call('GET', '/v1/tool-calls?limit=2')).body.tool_calls as { id: string }[];
  t.same(page1.map((x) => x.id), all.slice(0, 2).map((x) => x.id));
  const page2 = (await c.call('GET', `/v1/tool-calls?limit=2&before=${page1[1]!.id}`)).body.tool_calls as { id: string }[];
  t.same(page2.map((x) => x.id), all.slice(2, 4).map((x) => x.id));
  clock.advance(60_000);
  const s = (await c.createSession('carol', ['clima'])).body;
  const since = clock.now().toISOString();
  clock.advance(1);
  await c.execute(s.id, 'clima/get_forecast', { city: 'Recife' });
  t.same((await c.call('GET', `/v1/tool-calls?count_only=true&since=${encodeURIComponent(since)}`)).body, { count: 1 });
  t.match(await c.call('GET', '/v1/tool-calls?count_only=maybe'), { status: 400, body: { error: { code: 'invalid_query' } } });
  // An offset PostgreSQL would refuse is read as the instant it names; a year it cannot hold is a 400 (both were 500).
  const everything = (await c.call('GET', '/v1/tool-calls?count_only=true')).body;
  t.match(await c.call('GET', `/v1/tool-calls?count_only=true&since=${encodeURIComponent('2000-01-01T12:00:00+16:00')}`), { status: 200, body: everything });
  t.match(await c.call('GET', `/v1/tool-calls?since=${encodeURIComponent('0000-01-01T00:00:00Z')}`), { status: 400, body: { error: { code: 'invalid_query' } } });
  await c.close(s.id);
});

t.test('bare 400/404 bodies for tool-call ids', async (t) => {
  const o = client(other.key);
  for (const path of ['', '/payment-status', '/verification-status']) {
    for (const bad of ['tc_abc', '12x', '1'.repeat(201), '1'.repeat(300)].filter((b) => path !== '' || b.length < 257)) {
      const r = await c.call('GET', `/v1/tool-calls/${bad}${path}`);
      t.equal(r.status, 400);
      t.equal(typeof r.body.error, 'string');
      t.notOk('request_id' in r.body);
      t.ok(r.headers['x-request-id'], 'the request id is in the header');
    }
    const r = await o.call('GET', `/v1/tool-calls/${chargeCall}${path}`);
    t.equal(r.status, 404, "another organization's call");
    t.equal(typeof r.body.error, 'string');
    t.notOk('request_id' in r.body);
    t.equal((await c.call('GET', `/v1/tool-calls/tc_123${path}`)).status, 404);
  }
});

t.test('tenancy and x-svc-project', async (t) => {
  const o = client(other.key);
  t.equal((await o.call('GET', `/v1/sessions/${sessionId}`)).status, 404);
  t.equal((await o.connections(sessionId)).status, 404);
  t.equal((await o.close(sessionId)).status, 404);
  t.equal((await o.execute(sessionId, 'clima/get_forecast', { city: 'x' })).status, 404);
  t.same((await o.call('GET', '/v1/tool-calls?count_only=true')).body, { count: 0 });
  const p = (await app.inject({ method: 'POST', url: '/v1/projects', headers: org.key, payload: { name: 'Second', slug: 'second' } })).json();
  t.ok(p.id, JSON.stringify(p));
  const svc = client({ ...org.owner, 'x-svc-project': p.id });
  const s = await svc.createSession('dave', ['clima']);
  t.equal(s.status, 201, JSON.stringify(s.body));
  t.equal(s.body.mcp.headers['x-svc-project'], p.id);
  t.equal((await c.call('GET', `/v1/sessions/${s.body.id}`)).status, 404, 'the default project does not see it');
  t.equal((await svc.call('GET', `/v1/sessions/${s.body.id}`)).status, 200);
  await svc.close(s.body.id);
  t.match(await client({ ...platform, 'x-svc-user': org.ownerId, 'x-svc-project': 'prj_nope' }).createSession('x', []), { status: 403 });
});

t.test('test-mode mocks: a mocked tool answers its mock without the provider, recorded as mocked; unmocked tools 422; live keys 403; bad names 400', async (t) => {
  const mocks = { 'acme-payments/create_charge': { id: 'ch_mocked_1', status: 'succeeded', amount_minor: 777 }, 'clima/get_forecast': { city: 'Mockville', min_c: 1, max_c: 2 } };
  const s = await c.createSession('mia', ['acme-payments', 'clima'], mocks);
  t.equal(s.status, 201, JSON.stringify(s.body));
  t.equal(s.body.status, 'active');
  const seen = sb.seen.length;
  const x = await c.execute(s.body.id, 'acme-payments/create_charge', { amount_minor: 777, currency: 'BRL' });
  t.match(x, { status: 200, body: { success: true, data: mocks['acme-payments/create_charge'], error: null, server: 'acme-payments', tool: 'create_charge', tool_call_id: /^tc_\d+$/ } });
  t.equal(sb.seen.length, seen, 'the provider was not called');
  const record = (await c.call('GET', `/v1/tool-calls/${x.body.tool_call_id}`)).body;
  t.match(record, { status: 'success', session_id: s.body.id, output: mocks['acme-payments/create_charge'], routing: { mocked: true, environment: 'test' } }, 'recorded as a tool call marked mocked');

  // Another tool of an attached server, with no mock: 422, code at the top level, nothing recorded.
  const before = (await c.call('GET', '/v1/tool-calls?count_only=true')).body.count;
  const head = await ledger.store.headPosition();
  const unmocked = await c.execute(s.body.id, 'acme-payments/list_charges', {});
  t.equal(unmocked.status, 422);
  t.same(Object.keys(unmocked.body).sort(), ['code', 'message']);
  t.equal(unmocked.body.code, 'tool_not_mocked');
  t.same(await ledger.store.headPosition(), head, 'nothing written');
  t.equal((await c.call('GET', '/v1/tool-calls?count_only=true')).body.count, before);
  t.equal(sb.seen.length, seen, 'the provider was still not called');
  await c.close(s.body.id);
  const after = await ledger.store.headPosition();

  // A live key sending mocks: 403 in the spec's style for this row; nothing written.
  const live = client({ authorization: `Bearer ${org.liveKey}` });
  const refused = await live.createSession('mia', ['clima'], { 'clima/get_forecast': {} });
  t.equal(refused.status, 403);
  t.same(Object.keys(refused.body).sort(), ['code', 'message']);
  t.equal(refused.body.code, 'mocks_not_permitted');
  t.same(await ledger.store.headPosition(), after, 'nothing written');

  // Names the session cannot honour: 400 naming the member.
  for (const [name, why] of [['kambio/get_rate', /not attached/], ['clima/get_weather', /no tool get_weather/], ['clima', /<server>\/<tool>/]] as const) {
    const r = await c.createSession('mia', ['acme-payments', 'clima'], { [name]: { x: 1 } });
    t.equal(r.status, 400, name);
    t.match(r.body, { error: { code: 'invalid_body', message: why, details: { issues: [{ path: ['mocks', name] }] } } });
  }
  t.same(await ledger.store.headPosition(), after, 'nothing written');
});

t.test('session quota per organization: 403 quota_exceeded with the limit at the top level', async (t) => {
  const open: string[] = [];
  for (let i = 0; i < 5; i++) {
    const r = await c.createSession(`u${i}`, ['clima']);
    t.equal(r.status, 201, JSON.stringify(r.body));
    open.push(r.body.id);
  }
  const over = await c.createSession('u9', ['clima']);
  t.equal(over.status, 403);
  t.match(over.body, { error: 'quota_exceeded', limit: 5, current: 5 });
  t.equal((await client(other.key).createSession('z', ['clima'])).status, 201, 'another organization has its own quota');
  await c.close(open[0]!);
  t.equal((await c.createSession('u10', ['clima'])).status, 201, 'closing frees a slot');
});

t.test('bad bodies write nothing', async (t) => {
  const head = await ledger.store.headPosition();
  t.match(await c.call('POST', '/v1/sessions', { servers: ['acme-payments'] }), { status: 400, body: { error: { code: 'invalid_body' } } });
  t.match(await c.call('POST', '/v1/sessions', { servers: ['nope'], user_id: 'a' }), { status: 404, body: { error: { code: 'server_unknown' } } });
  t.match(await c.call('POST', '/v1/sessions', { servers: 'x', user_id: 'a' }), { status: 400 });
  t.same(await ledger.store.headPosition(), head);
});
